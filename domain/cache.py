"""Model cache: downloaded and verified are separate facts, and only verified is placeable.

Why it is so: docs/adr/decisions/domain.md (cache.py).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import MappingProxyType

from attrs import evolve, field, frozen

from nodeau.domain.artifacts import Artifact, ArtifactFile, Sha256


class CopyState(enum.StrEnum):
    """The state of one file's copy, or of a whole artifact's copy, on one machine."""

    MISSING = "missing"
    PARTIAL = "partial"
    DOWNLOADED = "downloaded"
    VERIFIED = "verified"
    MISMATCH = "mismatch"


@frozen(kw_only=True)
class CachedFile:
    """One artifact file in one machine's cache: what is expected and what is known of the copy.

    ``computed_sha256`` and ``verified_at`` record the last hash computed over
    the copy and when; they are both set or both absent, matching or not.
    """

    machine: str
    sha256: Sha256
    size_bytes: int
    bytes_present: int = 0
    computed_sha256: Sha256 | None = None
    verified_at: datetime | None = None

    def __attrs_post_init__(self) -> None:
        if not self.machine.strip():
            raise ValueError("a cached file belongs to a named machine")
        if self.size_bytes <= 0:
            raise ValueError(f"size_bytes must be positive, got {self.size_bytes}")
        if self.bytes_present < 0:
            raise ValueError(f"bytes_present cannot be negative, got {self.bytes_present}")
        if (self.computed_sha256 is None) != (self.verified_at is None):
            raise ValueError("a computed hash and the moment it was computed come together")

    @classmethod
    def expecting(cls, machine: str, file: ArtifactFile) -> CachedFile:
        """A file this machine should hold and has none of yet."""
        return cls(machine=machine, sha256=file.sha256, size_bytes=file.size_bytes)

    @property
    def downloaded(self) -> bool:
        """Every expected byte is present (which says nothing about which bytes)."""
        return self.bytes_present == self.size_bytes

    @property
    def verified(self) -> bool:
        """Every byte is present and the hash computed over them is the expected one."""
        return self.downloaded and self.computed_sha256 == self.sha256

    @property
    def state(self) -> CopyState:
        """This file's copy state; a wrong hash or too many bytes reads as a mismatch."""
        return file_state(self)


def file_state(file: CachedFile) -> CopyState:
    """The copy state of one cached file."""
    if file.bytes_present > file.size_bytes:
        return CopyState.MISMATCH
    if file.bytes_present == 0:
        return CopyState.MISSING
    if not file.downloaded:
        return CopyState.PARTIAL
    if file.computed_sha256 is None:
        return CopyState.DOWNLOADED
    return CopyState.VERIFIED if file.verified else CopyState.MISMATCH


def record_bytes(file: CachedFile, bytes_present: int) -> CachedFile:
    """The file with a new count of bytes present; any change of bytes drops the last check."""
    if bytes_present == file.bytes_present:
        return file
    return evolve(file, bytes_present=bytes_present, computed_sha256=None, verified_at=None)


def record_verification(file: CachedFile, computed: Sha256, at: datetime) -> CachedFile:
    """The file with the hash just computed over its copy; verified only if it matches all bytes."""
    return evolve(file, computed_sha256=computed, verified_at=at)


def record_changed_on_disk(file: CachedFile) -> CachedFile:
    """The file after its copy changed on disk: whatever was checked before no longer holds."""
    return evolve(file, computed_sha256=None, verified_at=None)


CacheKey = tuple[str, Sha256]


def _index(files: Iterable[CachedFile]) -> Mapping[CacheKey, CachedFile]:
    index: dict[CacheKey, CachedFile] = {}
    for f in files:
        if (f.machine, f.sha256) in index:
            raise ValueError(f"machine {f.machine} lists file {f.sha256.hex} twice")
        index[(f.machine, f.sha256)] = f
    return MappingProxyType(index)


@frozen(kw_only=True)
class ModelCache:
    """Every machine's cached files, one entry per (machine, expected SHA-256)."""

    files: Mapping[CacheKey, CachedFile] = field(factory=tuple, converter=_index)

    def file(self, machine: str, sha256: Sha256) -> CachedFile | None:
        """What this machine's cache knows of the file with this expected SHA-256."""
        return self.files.get((machine, sha256))

    @property
    def machines(self) -> frozenset[str]:
        """Every machine with at least one cached file entry."""
        return frozenset(machine for machine, _ in self.files)

    def with_file(self, file: CachedFile) -> ModelCache:
        """The cache with this entry added, or replacing the one for the same machine and hash."""
        kept = [f for key, f in self.files.items() if key != (file.machine, file.sha256)]
        return ModelCache(files=(*kept, file))

    def copy_state(self, machine: str, artifact: Artifact) -> CopyState:
        """The state of the whole artifact's copy on this machine."""
        return artifact_state(
            [wanted_file_state(self.file(machine, f.sha256), f) for f in artifact.files]
        )


def wanted_file_state(cached: CachedFile | None, wanted: ArtifactFile) -> CopyState:
    """The state of a cache entry against the artifact file it should be."""
    if cached is None:
        return CopyState.MISSING
    if cached.sha256 != wanted.sha256 or cached.size_bytes != wanted.size_bytes:
        return CopyState.MISMATCH
    return cached.state


def artifact_state(states: Iterable[CopyState]) -> CopyState:
    """A whole copy's state from its files': verified only if every file is."""
    seen = set(states)
    if not seen:
        raise ValueError("an artifact has at least one file")
    if CopyState.MISMATCH in seen:
        return CopyState.MISMATCH
    if seen == {CopyState.VERIFIED}:
        return CopyState.VERIFIED
    if seen == {CopyState.MISSING}:
        return CopyState.MISSING
    if seen <= {CopyState.VERIFIED, CopyState.DOWNLOADED}:
        return CopyState.DOWNLOADED
    return CopyState.PARTIAL


def placeable_machines(cache: ModelCache, artifact: Artifact) -> frozenset[str]:
    """The machines holding a verified copy of every file of the artifact, and no others."""
    return frozenset(
        m for m in cache.machines if cache.copy_state(m, artifact) is CopyState.VERIFIED
    )
