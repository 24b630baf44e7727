"""Artifacts: a model's identity is the SHA-256 of its bytes.

Why it is so: docs/adr/decisions/domain.md (artifacts.py).
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from attrs import field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.checks import positive

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_COMMIT_ID = re.compile(r"[0-9a-f]{40}")


def is_sha256_hex(text: str) -> bool:
    """Whether ``text`` is exactly 64 lowercase hexadecimal digits."""
    return _SHA256_HEX.fullmatch(text) is not None


@frozen(kw_only=True)
class Sha256:
    """A SHA-256 digest as 64 lowercase hex digits.

    Building one from unchecked text is a programming error (ValueError); text
    a person typed goes through :meth:`parse`.
    """

    hex: str

    def __attrs_post_init__(self) -> None:
        if not is_sha256_hex(self.hex):
            raise ValueError(f"not a lowercase 64-hex SHA-256: {self.hex!r}")

    @classmethod
    def parse(cls, text: str) -> Result[Sha256, str]:
        """A digest from user input; surrounding blanks, capitals and ``sha256:`` are accepted."""
        cleaned = text.strip().lower().removeprefix("sha256:")
        if is_sha256_hex(cleaned):
            return Success(cls(hex=cleaned))
        if len(cleaned) != 64:
            return Failure(
                f"a SHA-256 is 64 hexadecimal digits; {text.strip()!r} has {len(cleaned)}"
            )
        return Failure(f"a SHA-256 is 64 hexadecimal digits (0-9, a-f); {text.strip()!r} is not")

    @classmethod
    def of_bytes(cls, data: bytes) -> Sha256:
        """The digest of these bytes (pure computation, no I/O)."""
        return cls(hex=hashlib.sha256(data).hexdigest())

    @property
    def short(self) -> str:
        """The first 12 hex digits, for sentences a person reads."""
        return self.hex[:12]

    def __str__(self) -> str:
        return self.hex


ArtifactId: TypeAlias = Sha256
"""The SHA-256 that identifies an artifact's bytes."""


def relative_path_problem(path: str) -> str | None:
    """Why ``path`` is not a canonical relative POSIX path inside an artifact, or None if it is.

    Canonical matters: the path is part of a several-file artifact's manifest,
    so ``a.gguf`` and ``./a.gguf`` must not be two spellings of one file.
    """
    if not path:
        return "a file path cannot be empty"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"a file path cannot contain control characters: {path!r}"
    if "\\" in path:
        return f"a file path uses '/' as separator, not '\\': {path!r}"
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        return f"a file path must be relative, not absolute: {path!r}"
    parts = path.split("/")
    if ".." in parts:
        return f"a file path cannot climb out with '..': {path!r}"
    if "." in parts or "" in parts:
        return f"a file path must be canonical (no '.', no empty part): {path!r}"
    return None


def _valid_path(_instance: object, _attribute: object, value: str) -> None:
    problem = relative_path_problem(value)
    if problem is not None:
        raise ValueError(problem)


@frozen(kw_only=True)
class ArtifactFile:
    """One file of an artifact: its relative path, size and expected SHA-256."""

    path: str = field(validator=_valid_path)
    size_bytes: int = field(validator=positive)
    sha256: Sha256


def canonical_files(files: Iterable[ArtifactFile]) -> tuple[ArtifactFile, ...]:
    """The files sorted by path; rejects an empty set or a path listed twice."""
    ordered = tuple(sorted(files, key=lambda f: f.path))
    if not ordered:
        raise ValueError("an artifact has at least one file")
    paths = [f.path for f in ordered]
    if len(paths) != len(set(paths)):
        raise ValueError(f"an artifact lists a file path twice: {paths}")
    return ordered


def manifest_text(files: Sequence[ArtifactFile]) -> str:
    """The canonical manifest of several files: one ``path\\0sha\\n`` line each, sorted by path."""
    return "".join(f"{f.path}\0{f.sha256.hex}\n" for f in canonical_files(files))


def artifact_id_for(files: Sequence[ArtifactFile]) -> ArtifactId:
    """The identity of these files' bytes.

    One file: its own SHA-256, whatever it is called. Several: the SHA-256 of
    the canonical manifest, so listing order never changes the identity.
    """
    ordered = canonical_files(files)
    if len(ordered) == 1:
        return ordered[0].sha256
    return Sha256.of_bytes(manifest_text(ordered).encode("utf-8"))


class Origin(enum.StrEnum):
    """How an artifact's bytes first reached Nodeau."""

    CURATED = "curated"
    CUSTOM = "custom"


IMPORTED_SOURCE = "imported"


@frozen(kw_only=True)
class Artifact:
    """The bytes of a model, identified by their SHA-256 (see :func:`artifact_id_for`)."""

    id: ArtifactId
    origin: Origin
    files: tuple[ArtifactFile, ...] = field(converter=canonical_files)
    source: str

    def __attrs_post_init__(self) -> None:
        expected = artifact_id_for(self.files)
        if self.id != expected:
            raise ValueError(f"artifact id {self.id.hex} is not its files' id {expected.hex}")
        if not self.source.strip():
            raise ValueError("an artifact needs a source")

    @classmethod
    def of_files(cls, files: Iterable[ArtifactFile], *, origin: Origin, source: str) -> Artifact:
        """An artifact whose id is computed from its files."""
        ordered = canonical_files(files)
        return cls(id=artifact_id_for(ordered), origin=origin, files=ordered, source=source)

    @classmethod
    def imported(cls, files: Iterable[ArtifactFile]) -> Artifact:
        """A custom artifact: a GGUF (or split GGUF) the user imported."""
        return cls.of_files(files, origin=Origin.CUSTOM, source=IMPORTED_SOURCE)

    @property
    def size_bytes(self) -> int:
        """The total size of the artifact's files."""
        return sum(f.size_bytes for f in self.files)


def is_immutable_revision(revision: str) -> bool:
    """Whether ``revision`` is a 40-hex commit id: a branch or tag can move, a commit cannot."""
    return _COMMIT_ID.fullmatch(revision) is not None


@frozen(kw_only=True)
class CuratedEntry:
    """A catalog row: a publisher's files pinned to an immutable revision and their SHA-256s."""

    name: str
    publisher: str
    repo: str
    revision: str
    files: tuple[ArtifactFile, ...] = field(converter=canonical_files)

    def __attrs_post_init__(self) -> None:
        named = (("name", self.name), ("publisher", self.publisher), ("repo", self.repo))
        for label, value in named:
            if not value.strip():
                raise ValueError(f"a curated entry needs a {label}")
        if not is_immutable_revision(self.revision):
            raise ValueError(
                f"curated entry {self.name} must pin a 40-hex commit id, not {self.revision!r}"
            )

    @property
    def source(self) -> str:
        """Where the bytes come from: ``publisher/repo@revision``."""
        return f"{self.publisher}/{self.repo}@{self.revision}"

    def artifact(self) -> Artifact:
        """The artifact this entry's files are."""
        return Artifact.of_files(self.files, origin=Origin.CURATED, source=self.source)
