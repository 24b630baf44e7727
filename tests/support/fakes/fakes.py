"""Fakes of the ports, each proven by the same contract suite as its real adapter.

``FakeModelStore`` keeps a machine's cached files in memory; only partial fetches are real files,
because a fetcher appends to a path; a verified path it returns names no real file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path

from attrs import define

from nodeau.adapters.fs_store import WAIT_MESSAGE
from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.domain.cache import CachedFile
from nodeau.ports.models import (
    ChecksumMismatch,
    DiskReserveError,
    ImportedFile,
    ImportProgress,
    ModelFileError,
    PartialFile,
)


@define
class _Entry:
    size_bytes: int
    data: bytes | None = None  # the stored copy; None while it is only being fetched
    generation: int = 0  # changes whenever the stored copy changes, like a stat fingerprint
    computed: Sha256 | None = None
    verified_at: datetime | None = None
    checked_generation: int | None = None


class FakeDisk:
    """What one machine's fake cache holds; stores sharing it are like processes or restarts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder  # where partial fetches are real files
        self.entries: dict[Sha256, _Entry] = {}
        self.fetch_lock = threading.Lock()
        # the agent's rounds read what its copy worker writes: each call sees one state
        self.lock = threading.RLock()

    def overwrite(self, sha256: Sha256, data: bytes) -> None:
        """The stored copy is changed in place on disk."""
        entry = self.entries[sha256]
        entry.data = data
        entry.generation += 1

    def append(self, sha256: Sha256, data: bytes) -> None:
        """Bytes are appended to the stored copy on disk."""
        entry = self.entries[sha256]
        entry.data = (entry.data or b"") + data
        entry.generation += 1

    def touch(self, sha256: Sha256) -> None:
        """The stored copy's modification time changes, its bytes do not."""
        self.entries[sha256].generation += 1


class FakeModelStore:
    """``ModelStore`` in memory. Every import counts as a copy, so the reserve always applies."""

    def __init__(
        self,
        machine: str,
        *,
        disk: FakeDisk,
        clock: Callable[[], datetime],
        free_bytes: int = 1 << 40,
    ) -> None:
        self._machine = machine
        self._disk = disk
        self._clock = clock
        self._free = free_bytes

    @property
    def machine(self) -> str:
        return self._machine

    def import_file(self, source: Path, progress: ImportProgress | None = None) -> ImportedFile:
        with self._disk.lock:
            imported = self._import_file_unlocked(source)
        if progress is not None:
            progress("hashing", imported.size_bytes, imported.size_bytes)
        return imported

    def remove(self, sha256: Sha256) -> int:
        with self._disk.lock:
            entry = self._disk.entries.pop(sha256, None)
            part = self._partial(sha256)
            freed = part.stat().st_size if part.exists() else 0
            part.unlink(missing_ok=True)
        return freed + (0 if entry is None or entry.data is None else len(entry.data))

    def files(self) -> tuple[CachedFile, ...]:
        with self._disk.lock:
            return self._files_unlocked()

    def verify(self, sha256: Sha256) -> CachedFile:
        with self._disk.lock:
            return self._verify_unlocked(sha256)

    def verified_path(self, sha256: Sha256) -> Path | None:
        with self._disk.lock:
            return self._verified_path_unlocked(sha256)

    def partial(self, expected: ArtifactFile) -> PartialFile:
        with self._disk.lock:
            return self._partial_unlocked(expected)

    def commit(self, expected: ArtifactFile, computed: Sha256) -> CachedFile:
        with self._disk.lock:
            return self._commit_unlocked(expected, computed)

    def _import_file_unlocked(self, source: Path) -> ImportedFile:
        if not source.exists():
            raise ModelFileError(source, "no such file")
        if source.is_dir():
            raise ModelFileError(source, "is a directory, not a model file")
        if not source.is_file():
            raise ModelFileError(source, "is not a regular file")
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise ModelFileError(source, f"cannot be read ({exc.strerror})") from exc
        if not data:
            raise ModelFileError(source, "is empty")
        sha = Sha256.of_bytes(data)
        path = self._blob(sha)
        if self.verified_path(sha) is not None:
            return ImportedFile(sha256=sha, size_bytes=len(data), path=path, linked=False)
        if len(data) > self._free:
            raise DiskReserveError(
                f"{source}: a copy needs {len(data)} bytes and only {max(self._free, 0)} "
                "are free above the reserve; nothing was imported"
            )
        entry = self._disk.entries.setdefault(sha, _Entry(size_bytes=len(data)))
        entry.size_bytes = len(data)
        self._store(entry, data, sha)
        return ImportedFile(sha256=sha, size_bytes=len(data), path=path, linked=False)

    def _files_unlocked(self) -> tuple[CachedFile, ...]:
        return tuple(self._observe(sha) for sha in sorted(self._disk.entries, key=lambda s: s.hex))

    def _verify_unlocked(self, sha256: Sha256) -> CachedFile:
        entry = self._disk.entries.get(sha256)
        if entry is None or entry.data is None:
            raise ModelFileError(f"sha256:{sha256.hex}", "this machine holds no complete copy")
        entry.computed = Sha256.of_bytes(entry.data)
        entry.verified_at = self._clock()
        entry.checked_generation = entry.generation
        return self._observe(sha256)

    def _verified_path_unlocked(self, sha256: Sha256) -> Path | None:
        if sha256 not in self._disk.entries or not self._observe(sha256).verified:
            return None
        return self._blob(sha256)

    def _partial_unlocked(self, expected: ArtifactFile) -> PartialFile:
        entry = self._disk.entries.setdefault(expected.sha256, _Entry(size_bytes=0))
        entry.size_bytes = expected.size_bytes
        path = self._partial(expected.sha256)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as file:
            if file.tell() > expected.size_bytes:
                file.truncate(0)
            present = file.tell()
        return PartialFile(path=path, bytes_present=present)

    def _commit_unlocked(self, expected: ArtifactFile, computed: Sha256) -> CachedFile:
        path = self._partial(expected.sha256)
        if not path.exists():
            raise ModelFileError(path, "no fetch of this file is in progress")
        data = path.read_bytes()
        path.unlink()
        entry = self._disk.entries[expected.sha256]
        if computed != expected.sha256 or len(data) != expected.size_bytes:
            if entry.data is None:
                del self._disk.entries[expected.sha256]
            raise ChecksumMismatch(expected.path, expected.sha256, computed)
        entry.size_bytes = expected.size_bytes
        self._store(entry, data, computed)
        return self._observe(expected.sha256)

    def free_bytes(self) -> int:
        return self._free

    def exclusive_fetch(self, on_wait: Callable[[str], None]) -> AbstractContextManager[None]:
        return self._hold_fetch_lock(on_wait)

    @contextmanager
    def _hold_fetch_lock(self, on_wait: Callable[[str], None]) -> Iterator[None]:
        lock = self._disk.fetch_lock
        if not lock.acquire(blocking=False):
            on_wait(WAIT_MESSAGE)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def _blob(self, sha256: Sha256) -> Path:
        return self._disk.folder / "blobs" / sha256.hex  # never written: the bytes are in memory

    def _partial(self, sha256: Sha256) -> Path:
        return self._disk.folder / "partial" / f"{sha256.hex}.part"

    def _store(self, entry: _Entry, data: bytes, computed: Sha256) -> None:
        entry.data = data
        entry.generation += 1
        entry.computed = computed
        entry.verified_at = self._clock()
        entry.checked_generation = entry.generation

    def _observe(self, sha256: Sha256) -> CachedFile:
        entry = self._disk.entries[sha256]
        if entry.data is not None:
            present = len(entry.data)
            checked = entry.computed is not None and entry.checked_generation == entry.generation
        else:
            part = self._partial(sha256)
            present = part.stat().st_size if part.exists() else 0
            checked = False
        if not checked:
            entry.computed = entry.verified_at = entry.checked_generation = None
        return CachedFile(
            machine=self._machine,
            sha256=sha256,
            size_bytes=entry.size_bytes,
            bytes_present=present,
            computed_sha256=entry.computed,
            verified_at=entry.verified_at,
        )
