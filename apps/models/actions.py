"""Model use-cases shared by the CLI and the agent: import, pull, verify, status, info.

Each takes its ports as arguments, asks the domain for decisions and carries
them out. Expected failures are the ports' ModelError subclasses, whose text
is one line for a person.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path

from attrs import evolve, frozen
from returns.result import Failure, Success

from nodeau.domain.aliases import (
    AliasBook,
    ImportOutcome,
    alias_problem,
    import_under_alias,
    record_artifact,
)
from nodeau.domain.allowances import Allowances
from nodeau.domain.artifacts import Artifact, ArtifactFile, Sha256
from nodeau.domain.cache import CachedFile
from nodeau.domain.catalog import Catalog, CatalogEntry, find_entry
from nodeau.domain.memory import MeasuredTable
from nodeau.domain.model_info import ModelInfo, ModelSummary, model_info
from nodeau.domain.qualification import (
    Capability,
    QualificationEvidence,
    capability_states,
    qualified_line,
)
from nodeau.domain.resolution import Known, Resolution, Unresolved, display_name, resolve_name
from nodeau.ports.models import (
    DiskReserveError,
    FetchProgress,
    ImportedFile,
    ImportProgress,
    ModelError,
    ModelInspector,
    ModelStore,
    Publisher,
)
from nodeau.ports.registry import ArtifactRegistry


class UnknownModel(ModelError):
    """No alias, catalog name or artifact id matches what was typed."""


@frozen(kw_only=True)
class ImportReport:
    imported: ImportedFile
    summary: ModelSummary
    outcome: ImportOutcome | None  # None with --no-register


def default_alias(path: Path) -> str:
    """The alias an import gets when none is given: the file name without .gguf."""
    stem = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    problem = alias_problem(stem)
    if problem is not None:
        raise ModelError(f"{path}: {problem}; pass --alias NAME")
    return stem


def import_model(
    path: Path,
    *,
    alias: str | None,
    register: bool,
    inspector: ModelInspector,
    store: ModelStore,
    registry: ArtifactRegistry,
    progress: ImportProgress | None = None,
) -> ImportReport:
    """Check the file is a GGUF model, store it verified, and (unless told not to) register
    it; ``progress`` is told each step of the store's read."""
    if alias is not None and (problem := alias_problem(alias)) is not None:
        raise ModelError(f"--alias {alias!r}: {problem}")
    name = alias if alias is not None else (default_alias(path) if register else None)
    summary = inspector.inspect(path)
    imported = store.import_file(path, progress)
    if not register:
        return ImportReport(imported=imported, summary=summary, outcome=None)
    artifact = Artifact.imported(
        [ArtifactFile(path=path.name, size_bytes=imported.size_bytes, sha256=imported.sha256)]
    )
    outcome = registry.update(lambda book: import_under_alias(book, name, artifact))
    return ImportReport(imported=imported, summary=summary, outcome=outcome)


@frozen(kw_only=True)
class PullReport:
    entry: CatalogEntry
    fetched: tuple[CachedFile, ...]
    already_verified: tuple[ArtifactFile, ...]


def reserve_guard(
    store: ModelStore, expected: ArtifactFile, progress: FetchProgress
) -> FetchProgress:
    """Progress that also refuses to eat into the free-disk reserve while fetching."""

    def report(present: int, total: int) -> None:
        remaining = expected.size_bytes - present
        if store.free_bytes() < remaining:
            raise DiskReserveError(
                f"{expected.path}: {remaining} more bytes would eat into the free-disk reserve; "
                "fetch stopped, what arrived is kept for a resume"
            )
        progress(present, total)

    return report


def pull_model(
    name: str,
    *,
    catalog: Catalog,
    store: ModelStore,
    publisher: Publisher,
    registry: ArtifactRegistry,
    url_for: Callable[[CatalogEntry, ArtifactFile], str],
    progress_for: Callable[[ArtifactFile], AbstractContextManager[FetchProgress]],
    on_wait: Callable[[str], None],
) -> PullReport:
    """Fetch every file of a catalog model this machine does not hold verified."""
    entry = catalog_entry(catalog, name)
    fetched: list[CachedFile] = []
    skipped: list[ArtifactFile] = []
    with store.exclusive_fetch(on_wait):
        for file in entry.entry.files:
            if store.verified_path(file.sha256) is not None:
                skipped.append(file)
                continue
            partial = store.partial(file)
            if store.free_bytes() < file.size_bytes - partial.bytes_present:
                raise DiskReserveError(
                    f"{file.path}: needs {file.size_bytes - partial.bytes_present} more bytes and "
                    f"only {max(store.free_bytes(), 0)} are free above the reserve; nothing fetched"
                )
            with progress_for(file) as progress:
                computed = publisher.fetch_into(
                    url_for(entry, file), partial, file, reserve_guard(store, file, progress)
                )
            fetched.append(store.commit(file, computed))
    registry.update(lambda book: record_artifact(book, entry.entry.artifact()))
    return PullReport(entry=entry, fetched=tuple(fetched), already_verified=tuple(skipped))


def catalog_entry(catalog: Catalog, name: str) -> CatalogEntry:
    """The catalog entry called ``name``, or UnknownModel saying what is close."""
    match find_entry(catalog, name):
        case Success(CatalogEntry() as entry):
            return entry
        case Failure(str() as why):
            raise UnknownModel(why)
    raise AssertionError("find_entry answers a Result")


@frozen(kw_only=True)
class Resolved:
    """What a typed model name points at, and every name it goes by."""

    artifact: Artifact
    names: tuple[str, ...]
    asked: str | None = None

    @property
    def display_name(self) -> str:
        """The name a person reads (the domain's ``display_name``)."""
        return display_name(self.asked, self.names, self.artifact.id.hex)


def known_here(
    book: AliasBook, catalog: Catalog, held: Iterable[CachedFile] = ()
) -> dict[Sha256, Artifact]:
    """Every artifact this machine knows: the catalog's and the registry's, and each whole
    file of ``held`` (this machine's cache) that neither lists, as an unnamed artifact of
    its own: a copy imported ``--no-register``, known here by its id alone."""
    known = {
        **{e.entry.artifact().id: e.entry.artifact() for e in catalog.entries},
        **book.artifacts,
    }
    listed = {f.sha256 for a in known.values() for f in a.files}
    for f in held:
        if f.sha256 not in listed and f.bytes_present == f.size_bytes:
            file = ArtifactFile(
                path=f"{f.sha256.hex}.gguf", size_bytes=f.size_bytes, sha256=f.sha256
            )
            known[f.sha256] = Artifact.imported([file])
    return known


def model_names(artifact: Artifact, book: AliasBook, catalog: Catalog) -> tuple[str, ...]:
    """Aliases now naming the artifact, and catalog names whose files are its files."""
    aliases = [a for a in book.aliases if book.resolve(a) == artifact.id]
    curated = [e.name for e in catalog.entries if e.entry.artifact().id == artifact.id]
    return tuple(sorted(set(aliases) | set(curated)))


def resolve_model(
    text: str, book: AliasBook, catalog: Catalog, held: Iterable[CachedFile] = ()
) -> Resolved:
    """An alias, a catalog name, an artifact id, or a unique id prefix (``resolve_name``);
    ``held``: this machine's files, whose unnamed copies answer to their ids."""
    known = known_here(book, catalog, held)
    candidates = [
        Known(artifact_id=i.hex, names=model_names(a, book, catalog)) for i, a in known.items()
    ]
    match resolve_name(text, candidates):
        case Resolution() as found:
            artifact = next(a for i, a in known.items() if i.hex == found.artifact_id)
            return Resolved(artifact=artifact, names=found.names, asked=text)
        case Unresolved() as missed:
            raise UnknownModel(missed.sentence)


def verify_model(resolved: Resolved, store: ModelStore) -> tuple[CachedFile, ...]:
    """Re-read this machine's copy of every file of the artifact and recompute its hash."""
    return tuple(store.verify(f.sha256) for f in resolved.artifact.files)


def verified_summary(
    first: Sha256, store: ModelStore, inspector: ModelInspector
) -> ModelSummary | None:
    """What the verified copy this machine holds of a file (an artifact's first) declares
    about itself; None when it holds none."""
    path = store.verified_path(first)
    return None if path is None else inspector.inspect(path)


def describe_model(
    resolved: Resolved,
    *,
    store: ModelStore,
    inspector: ModelInspector,
    registry: ArtifactRegistry,
    allowances: Allowances,
    catalog_capabilities: frozenset[Capability] | None = None,
) -> ModelInfo:
    """Architecture values from this machine's verified copy, with predictions, measurements
    and each capability's state (from its newest qualification, and ``catalog_capabilities``:
    what the catalog entry listing its bytes claims, None when none does)."""
    summary = verified_summary(resolved.artifact.files[0].sha256, store, inspector)
    if summary is None:
        raise ModelError(
            f"{resolved.display_name}: this machine "
            "holds no verified copy, so its architecture values cannot be read; pull or import it"
        )
    return model_description(
        artifact_id=resolved.artifact.id.hex,
        size_bytes=resolved.artifact.size_bytes,
        summary=summary,
        table=registry.measurements(),
        evidence=registry.evidence().for_artifact(resolved.artifact.id),
        catalog_capabilities=catalog_capabilities,
        allowances=allowances,
    )


def model_description(
    *,
    artifact_id: str,
    size_bytes: int,
    summary: ModelSummary,
    table: MeasuredTable,
    evidence: QualificationEvidence | None,
    catalog_capabilities: frozenset[Capability] | None,
    allowances: Allowances,
) -> ModelInfo:
    """What ``model info`` says of an artifact whose summary was read, on either plane: the
    domain's estimates and measured configurations (``table``), and each capability's state
    from ``evidence`` (its newest qualification, None: never qualified) and the catalog."""
    info = model_info(
        artifact_id=artifact_id,
        size_bytes=size_bytes,
        summary=summary,
        table=table,
        allowances=allowances,
    )
    return evolve(
        info,
        capabilities=capability_states(evidence, catalog_capabilities),
        qualified=qualified_line(evidence) if evidence is not None else None,
    )
