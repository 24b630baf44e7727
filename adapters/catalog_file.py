"""The curated catalog as a JSON document (cattrs): loading it, and writing one.

Why it is so: docs/adr/decisions/adapters.md (catalog_file.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NewType, TypeVar

import cattrs
from attrs import frozen
from cattrs.cols import is_sequence
from returns.result import Failure, Success

from nodeau.adapters.private_files import replace_whole
from nodeau.adapters.strict_json import (
    FieldProblem,
    exactly,
    first_problem,
    json_kind,
    list_of,
    no_duplicate_keys,
    positive_count,
)
from nodeau.domain.artifacts import (
    ArtifactFile,
    CuratedEntry,
    Sha256,
    is_immutable_revision,
    relative_path_problem,
)
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.qualification import Capability
from nodeau.domain.tasks import Task
from nodeau.ports.models import CatalogError

CATALOG_VERSION = 1

_Text = NewType("_Text", str)  # a string with something in it
_Count = NewType("_Count", int)  # a whole number above zero
_Revision = NewType("_Revision", str)
_FilePath = NewType("_FilePath", str)
_Version = NewType("_Version", int)


@frozen(kw_only=True)
class _FileDoc:
    path: _FilePath
    size_bytes: _Count
    sha256: Sha256


@frozen(kw_only=True)
class _SummaryDoc:
    architecture: _Text
    parameters: _Text
    context_length: _Count
    quantisation: _Text


@frozen(kw_only=True)
class _ModelDoc:
    name: _Text
    publisher: _Text
    repo: _Text
    revision: _Revision
    files: tuple[_FileDoc, ...]
    summary: _SummaryDoc
    tasks: tuple[Task, ...]
    capabilities: tuple[Capability, ...] = ()


@frozen(kw_only=True)
class _CatalogDoc:
    catalog_version: _Version
    models: tuple[_ModelDoc, ...]


_T = TypeVar("_T")


def _text(value: object, _type: object) -> _Text:
    text = exactly(str, "a string")(value, _type)
    if not text.strip():
        raise FieldProblem("cannot be empty")
    return _Text(text)


def _revision(value: object, _type: object) -> _Revision:
    text = exactly(str, "a string")(value, _type)
    if not is_immutable_revision(text):
        raise FieldProblem(f"{text!r} is not a 40-hex commit id (a branch or a tag can move)")
    return _Revision(text)


def _file_path(value: object, _type: object) -> _FilePath:
    text = exactly(str, "a string")(value, _type)
    problem = relative_path_problem(text)
    if problem is not None:
        raise FieldProblem(problem)
    return _FilePath(text)


def _version(value: object, _type: object) -> _Version:
    number = exactly(int, "a whole number")(value, _type)
    if number != CATALOG_VERSION:
        raise FieldProblem(f"this Nodeau reads catalog version {CATALOG_VERSION}, not {number}")
    return _Version(number)


def _sha256(value: object, _type: object) -> Sha256:
    text = exactly(str, "a string")(value, _type)
    match Sha256.parse(text):
        case Success(Sha256() as parsed):
            return parsed
        case Failure(why):
            raise FieldProblem(str(why))
    raise AssertionError("Sha256.parse answers a Result")


def _task(value: object, _type: object) -> Task:
    text = exactly(str, "a string")(value, _type)
    try:
        return Task(text)
    except ValueError:
        known = ", ".join(t.value for t in Task)
        raise FieldProblem(f"{text!r} is not a task ({known})") from None


def _capability(value: object, _type: object) -> Capability:
    text = exactly(str, "a string")(value, _type)
    try:
        return Capability(text)
    except ValueError:
        known = ", ".join(c.value for c in Capability)
        raise FieldProblem(f"{text!r} is not a capability ({known})") from None


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    hooks: dict[Any, Callable[[object, object], object]] = {
        str: exactly(str, "a string"),
        int: exactly(int, "a whole number"),
        _Text: _text,
        _Count: positive_count,
        _Revision: _revision,
        _FilePath: _file_path,
        _Version: _version,
        Sha256: _sha256,
        Task: _task,
        Capability: _capability,
    }
    for kind, hook in hooks.items():
        converter.register_structure_hook(kind, hook)
    converter.register_structure_hook_factory(is_sequence, lambda t: list_of(t, converter))
    converter.register_unstructure_hook(Sha256, lambda digest: digest.hex)
    return converter


_CONVERTER = _converter()


def _first_problem(exc: Exception) -> str:
    """``models[0].revision: <problem>`` for the first problem, and how many more there are."""
    found = first_problem(exc)
    if found is None:
        return str(exc)
    plural = "s" if found.others > 1 else ""
    more = f" (and {found.others} more problem{plural})" if found.others else ""
    return f"{found.where or 'the document'}: {found.text}{more}"


def _entry(model: _ModelDoc) -> CatalogEntry:
    files = [
        ArtifactFile(path=f.path, size_bytes=f.size_bytes, sha256=f.sha256) for f in model.files
    ]
    entry = CuratedEntry(
        name=model.name,
        publisher=model.publisher,
        repo=model.repo,
        revision=model.revision,
        files=tuple(files),
    )
    summary = ArchitectureSummary(
        architecture=model.summary.architecture,
        parameters=model.summary.parameters,
        context_length=model.summary.context_length,
        quantisation=model.summary.quantisation,
    )
    return CatalogEntry(
        entry=entry, summary=summary, tasks=model.tasks, capabilities=model.capabilities
    )


def parse_catalog(text: str, source: str) -> Catalog:
    """The catalog in the JSON ``text``; CatalogError naming ``source`` and the first problem."""
    try:
        raw = json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"{source}: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"
        ) from exc
    except FieldProblem as exc:
        raise CatalogError(f"{source}: {exc}") from exc
    if not isinstance(raw, dict):
        raise CatalogError(f"{source}: the document must be a JSON object, not {json_kind(raw)}")
    try:
        document = _CONVERTER.structure(raw, _CatalogDoc)
    except Exception as exc:  # cattrs reports every problem as an exception (group)
        raise CatalogError(f"{source}: {_first_problem(exc)}") from exc
    entries = []
    for index, model in enumerate(document.models):
        for label, values in (("files", model.files), ("tasks", model.tasks)):
            if not values:
                raise CatalogError(f"{source}: models[{index}].{label}: cannot be empty")
        try:
            entries.append(_entry(model))
        except ValueError as exc:  # a rule across fields, such as a file path listed twice
            raise CatalogError(f"{source}: models[{index}]: {exc}") from exc
    try:
        return Catalog(entries=tuple(entries))
    except ValueError as exc:
        raise CatalogError(f"{source}: models: {exc}") from exc


def catalog_json(catalog: Catalog) -> str:
    """The document for ``catalog``, which :func:`parse_catalog` reads back to equal values."""
    models = [
        _CONVERTER.unstructure(
            e.entry
        )  # name, publisher, repo, revision, files: as in the document
        | {"summary": _CONVERTER.unstructure(e.summary), "tasks": [t.value for t in e.tasks]}
        | {"capabilities": [c.value for c in e.capabilities]}
        for e in catalog.entries
    ]
    return json.dumps({"catalog_version": CATALOG_VERSION, "models": models}, indent=2) + "\n"


class JsonCatalogFile:
    """A :class:`~nodeau.ports.models.CatalogSource` reading a JSON document from a file, and
    writing one whole (``save``)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def save(self, catalog: Catalog) -> None:
        """Write ``catalog`` as the file's whole document, renamed over the old one (a
        reader sees the old document or the new, never half of one)."""
        try:
            replace_whole(self._path, catalog_json(catalog).encode("utf-8"))
        except OSError as exc:
            raise CatalogError(f"{self._path}: cannot write ({exc.strerror})") from exc

    def load(self) -> Catalog:
        """The catalog in the file; CatalogError naming the file and the problem."""
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise CatalogError(f"{self._path}: no such catalog file") from exc
        except UnicodeDecodeError as exc:
            raise CatalogError(f"{self._path}: not UTF-8 text (byte {exc.start})") from exc
        except OSError as exc:
            raise CatalogError(f"{self._path}: cannot read ({exc.strerror})") from exc
        return parse_catalog(text, str(self._path))


class LayeredCatalogFiles:
    """The shipped catalog with a person's own entries over it: a ``CatalogSource`` whose
    catalog is both files' entries (the own file may be absent; a name in both refuses)."""

    def __init__(self, shipped: Path, own: Path) -> None:
        self._shipped = JsonCatalogFile(shipped)
        self._own = own

    def load(self) -> Catalog:
        shipped = self._shipped.load()
        if not self._own.exists():
            return shipped
        own = JsonCatalogFile(self._own).load()
        try:
            return Catalog(entries=(*shipped.entries, *own.entries))
        except ValueError as exc:
            raise CatalogError(
                f"{self._own}: {exc} (with the catalog shipped with Nodeau)"
            ) from exc
