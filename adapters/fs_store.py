"""The model cache on a local file system: content-addressed files and an SQLite index of facts.

Why it is so: docs/adr/decisions/adapters.md (fs_store.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from nodeau.adapters.hashing import hash_open_file, pump
from nodeau.adapters.store_files import (
    Fingerprint,
    fingerprint,
    fsync_path,
    open_model_file,
    os_problem,
    regular_stat,
    rename_durably,
)
from nodeau.domain.artifacts import ArtifactFile, Sha256, is_sha256_hex
from nodeau.domain.cache import CachedFile
from nodeau.ports.models import (
    ChecksumMismatch,
    DiskReserveError,
    ImportedFile,
    ImportProgress,
    ModelFileError,
    PartialFile,
)

WAIT_MESSAGE = "another fetch is running on this machine; waiting for it to finish"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    sha256 TEXT PRIMARY KEY, size_bytes INTEGER NOT NULL CHECK (size_bytes > 0),
    bytes_present INTEGER NOT NULL DEFAULT 0, computed_sha256 TEXT, verified_at TEXT,
    fp_size INTEGER, fp_mtime_ns INTEGER, fp_inode INTEGER
)
"""


class _Row(NamedTuple):
    sha256: str
    size_bytes: int
    bytes_present: int
    computed_sha256: str | None
    verified_at: str | None
    fp_size: int | None
    fp_mtime_ns: int | None
    fp_inode: int | None

    @property
    def fingerprint(self) -> tuple[int | None, int | None, int | None]:
        return (self.fp_size, self.fp_mtime_ns, self.fp_inode)


_COLUMNS = ", ".join(_Row._fields)


def _step(progress: ImportProgress | None, step: str, size: int) -> Callable[[int], None] | None:
    """``progress`` for one step of an import of ``size`` bytes (None: nothing to tell)."""
    if progress is None:
        return None
    return lambda done: progress(step, done, size)


class FilesystemModelStore:
    """``ModelStore`` for one machine: files under ``root``, facts in ``root/index.sqlite3``."""

    def __init__(
        self,
        root: Path,
        machine: str,
        *,
        reserve_bytes: int,
        clock: Callable[[], datetime],
    ) -> None:
        if not machine.strip():
            raise ValueError("a model store belongs to a named machine")
        if reserve_bytes < 0:
            raise ValueError(f"reserve_bytes cannot be negative, got {reserve_bytes}")
        self._root = root
        self._machine = machine
        self._reserve = reserve_bytes
        self._clock = clock
        self._blobs = root / "blobs" / "sha256"
        self._partials = root / "partial"
        self._tmp = root / "tmp"
        self._index = root / "index.sqlite3"
        self._db_lock = threading.Lock()
        try:
            for folder in (self._blobs, self._partials, self._tmp):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelFileError(
                root, f"cannot create the model cache ({os_problem(exc)})"
            ) from exc
        try:
            self._db = sqlite3.connect(
                self._index, timeout=60, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise ModelFileError(self._index, f"cannot open the cache index ({exc})") from exc
        with self._transaction() as db:
            db.execute(_SCHEMA)
        self._clean_tmp()
        self._adopt_orphans()

    def close(self) -> None:
        """Close the index; the store cannot be used afterwards."""
        with self._db_lock:
            self._db.close()

    def __enter__(self) -> FilesystemModelStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def machine(self) -> str:
        return self._machine

    # -- the port ----------------------------------------------------------

    def import_file(self, source: Path, progress: ImportProgress | None = None) -> ImportedFile:
        # shared: imports run side by side, and an opening store cleans tmp/ only while none runs
        with self._held("import.lock", fcntl.LOCK_SH, on_wait=None):
            fd, opened = open_model_file(source)
            try:
                digest, before, after = hash_open_file(
                    fd, _step(progress, "hashing", opened.st_size)
                )
            except OSError as exc:
                raise ModelFileError(source, f"cannot be read ({os_problem(exc)})") from exc
            finally:
                os.close(fd)
            if fingerprint(before) != fingerprint(after):
                raise ModelFileError(source, "changed while it was read; nothing was imported")
            blob = self._blob(digest)
            if self.verified_path(digest) is None:
                linked = self._store(
                    source, digest, before, _step(progress, "copying", before.st_size)
                )
            else:  # the same bytes are held and verified already: nothing to do
                held = os.stat(blob)
                linked = (held.st_dev, held.st_ino) == (before.st_dev, before.st_ino)
            return ImportedFile(sha256=digest, size_bytes=before.st_size, path=blob, linked=linked)

    def files(self) -> tuple[CachedFile, ...]:
        return tuple(self._observe(row) for row in self._rows())

    def verify(self, sha256: Sha256) -> CachedFile:
        row = self._row(sha256)
        blob = self._blob(sha256)
        if row is None or regular_stat(blob) is None:
            raise ModelFileError(f"sha256:{sha256.hex}", "this machine holds no complete copy")
        try:
            fd = os.open(blob, os.O_RDONLY)
            try:
                computed, before, _ = hash_open_file(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ModelFileError(blob, f"cannot be read ({os_problem(exc)})") from exc
        # the fingerprint from before the read: a change during it shows as a change after
        self._record(sha256, row.size_bytes, computed, fingerprint(before))
        return self._observe(sha256)

    def verified_path(self, sha256: Sha256) -> Path | None:
        row = self._row(sha256)
        if row is None or not self._observe(row).verified:
            return None
        return self._blob(sha256)

    def partial(self, expected: ArtifactFile) -> PartialFile:
        path = self._partial(expected.sha256)
        with self._transaction() as db:
            db.execute(
                "INSERT INTO files (sha256, size_bytes) VALUES (?, ?) ON CONFLICT (sha256) "
                "DO UPDATE SET size_bytes = excluded.size_bytes",
                (expected.sha256.hex, expected.size_bytes),
            )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                present = os.fstat(fd).st_size
                if present > expected.size_bytes:
                    # more bytes than the file has cannot be a prefix of it: start again
                    os.ftruncate(fd, 0)
                    present = 0
            finally:
                os.close(fd)
        except OSError as exc:
            raise ModelFileError(path, f"cannot be written ({os_problem(exc)})") from exc
        return PartialFile(path=path, bytes_present=present)

    def commit(self, expected: ArtifactFile, computed: Sha256) -> CachedFile:
        part = self._partial(expected.sha256)
        blob = self._blob(expected.sha256)
        try:
            fd = os.open(part, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise ModelFileError(part, "no fetch of this file is in progress") from exc
        try:
            size = os.fstat(fd).st_size
            if computed != expected.sha256 or size != expected.size_bytes:
                os.unlink(part)
                with self._transaction() as db:
                    if regular_stat(blob) is None:
                        db.execute("DELETE FROM files WHERE sha256 = ?", (expected.sha256.hex,))
                raise ChecksumMismatch(expected.path, expected.sha256, computed)
            os.fsync(fd)
            os.fchmod(fd, 0o444)
            stored = fingerprint(os.fstat(fd))
            rename_durably(part, blob)
        except OSError as exc:
            raise ModelFileError(blob, f"cannot be stored ({os_problem(exc)})") from exc
        finally:
            os.close(fd)
        self._record(expected.sha256, expected.size_bytes, computed, stored)
        return self._observe(expected.sha256)

    def remove(self, sha256: Sha256) -> int:
        freed = 0
        for path in (self._blob(sha256), self._partial(sha256)):
            held = regular_stat(path)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ModelFileError(path, f"cannot be deleted ({os_problem(exc)})") from exc
            freed += 0 if held is None else held.st_size
        with self._transaction() as db:
            db.execute("DELETE FROM files WHERE sha256 = ?", (sha256.hex,))
        fsync_path(self._blobs, os.O_DIRECTORY)
        return freed

    def free_bytes(self) -> int:
        return shutil.disk_usage(self._root).free - self._reserve

    def exclusive_fetch(self, on_wait: Callable[[str], None]) -> AbstractContextManager[None]:
        return self._held("fetch.lock", fcntl.LOCK_EX, on_wait)

    # -- files -------------------------------------------------------------

    def _blob(self, sha256: Sha256) -> Path:
        return self._blobs / sha256.hex

    def _partial(self, sha256: Sha256) -> Path:
        return self._partials / f"{sha256.hex}.part"

    def _store(
        self,
        source: Path,
        digest: Sha256,
        hashed: os.stat_result,
        copied: Callable[[int], None] | None = None,
    ) -> bool:
        """Link or copy the user's file under its final name and record it verified."""
        blob = self._blob(digest)
        tmp = self._tmp / f"{digest.hex}.{uuid.uuid4().hex}"
        try:
            linked = self._link(source, tmp, hashed)
            if not linked:
                self._copy(source, tmp, digest, hashed.st_size, copied)
            stored = fingerprint(os.stat(tmp))
            rename_durably(tmp, blob)
        except OSError as exc:
            raise ModelFileError(blob, f"cannot be stored ({os_problem(exc)})") from exc
        finally:
            with suppress(FileNotFoundError):
                os.unlink(tmp)  # left only by a failure, or by a rename onto its own inode
        self._record(digest, hashed.st_size, digest, stored)
        return linked

    def _link(self, source: Path, tmp: Path, hashed: os.stat_result) -> bool:
        """Hard-link the user's file into tmp/; False where the file system will not."""
        try:
            os.link(source, tmp)
        except OSError:
            return False  # another file system, no permission, too many links: copy instead
        linked = os.stat(tmp)
        if (linked.st_dev, *fingerprint(linked)) != (hashed.st_dev, *fingerprint(hashed)):
            raise ModelFileError(source, "changed while it was imported; nothing was imported")
        fsync_path(tmp)
        return True

    def _copy(
        self,
        source: Path,
        tmp: Path,
        digest: Sha256,
        size: int,
        copied: Callable[[int], None] | None = None,
    ) -> None:
        """Copy the user's file into tmp/ (read-only), hashing the bytes as they are written."""
        free = self.free_bytes()
        if size > free:
            raise DiskReserveError(
                f"{source}: a copy needs {size} bytes and only {max(free, 0)} are free above "
                f"the reserve of {self._reserve} bytes; nothing was imported"
            )
        fd, _ = open_model_file(source)
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                hasher = hashlib.sha256()
                count = pump(fd, hasher, sink=out, read=copied)
                os.fsync(out)
                os.fchmod(out, 0o444)
            finally:
                os.close(out)
        finally:
            os.close(fd)
        if count != size or hasher.hexdigest() != digest.hex:
            raise ModelFileError(source, "changed while it was copied; nothing was imported")

    @contextmanager
    def _held(self, name: str, mode: int, on_wait: Callable[[str], None] | None) -> Iterator[None]:
        """Hold the lock file ``root/name`` (flock ``mode``), saying so first if it must wait."""
        fd = os.open(self._root / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait(WAIT_MESSAGE)
                fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _clean_tmp(self) -> None:
        """Remove what interrupted imports left in tmp/, unless an import is running now."""
        fd = os.open(self._root / "import.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # a running import's file is not a leftover; the next opening cleans
            for entry in os.scandir(self._tmp):
                with suppress(OSError):  # a folder someone made there is not ours to remove
                    os.unlink(entry.path)
        finally:
            os.close(fd)

    # -- facts -------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._db_lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise ModelFileError(self._index, f"the cache index failed ({exc})") from exc

    def _rows(self, sha256: Sha256 | None = None) -> list[_Row]:
        where = "ORDER BY sha256" if sha256 is None else "WHERE sha256 = ?"
        args = () if sha256 is None else (sha256.hex,)
        # one statement reads one consistent snapshot; no transaction, so writers are not held up
        with self._db_lock:
            try:
                found = self._db.execute(f"SELECT {_COLUMNS} FROM files {where}", args).fetchall()
            except sqlite3.Error as exc:
                raise ModelFileError(self._index, f"the cache index failed ({exc})") from exc
        return [_Row(*row) for row in found]

    def _row(self, sha256: Sha256) -> _Row | None:
        found = self._rows(sha256)
        return found[0] if found else None

    def _record(
        self, sha256: Sha256, size_bytes: int, computed: Sha256, stored: Fingerprint
    ) -> None:
        """Record a hash computed over the file with this fingerprint, and when."""
        at = self._clock().isoformat()
        with self._transaction() as db:
            db.execute(
                f"INSERT OR REPLACE INTO files ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (sha256.hex, size_bytes, stored[0], computed.hex, at, *stored),
            )

    def _observe(self, row_or_sha: _Row | Sha256) -> CachedFile:
        """The row's facts as they hold now: a check counts only on an unchanged file."""
        row = self._row(row_or_sha) if isinstance(row_or_sha, Sha256) else row_or_sha
        if row is None:
            raise ModelFileError(f"sha256:{row_or_sha}", "this machine holds no such file")
        sha = Sha256(hex=row.sha256)
        held = regular_stat(self._blob(sha))
        if held is not None:
            present = held.st_size
            checked = row.computed_sha256 is not None and row.fingerprint == fingerprint(held)
        else:
            part = regular_stat(self._partial(sha))
            present = 0 if part is None else part.st_size
            checked = False
        if present != row.bytes_present or (row.computed_sha256 is not None and not checked):
            self._forget_check(row, present)
        computed, at = None, None
        if checked and row.computed_sha256 is not None and row.verified_at is not None:
            computed = Sha256(hex=row.computed_sha256)
            at = datetime.fromisoformat(row.verified_at)
        return CachedFile(
            machine=self._machine,
            sha256=sha,
            size_bytes=row.size_bytes,
            bytes_present=present,
            computed_sha256=computed,
            verified_at=at,
        )

    def _forget_check(self, row: _Row, present: int) -> None:
        """Persist that the file changed: only if no one recorded a new check meanwhile."""
        with self._transaction() as db:
            db.execute(
                "UPDATE files SET bytes_present = ?, computed_sha256 = NULL, verified_at = NULL, "
                "fp_size = NULL, fp_mtime_ns = NULL, fp_inode = NULL WHERE sha256 = ? "
                "AND computed_sha256 IS ? AND fp_size IS ? AND fp_mtime_ns IS ? AND fp_inode IS ?",
                (present, row.sha256, row.computed_sha256, *row.fingerprint),
            )

    def _adopt_orphans(self) -> None:
        """List a file found under its final name with no row (a crash between rename and row).

        It is listed as downloaded, never as verified: ``verify`` or a new import decides.
        """
        known = {row.sha256 for row in self._rows()}
        names = [e.name for e in os.scandir(self._blobs) if is_sha256_hex(e.name)]
        found = [(name, regular_stat(self._blobs / name)) for name in names if name not in known]
        orphans = [(name, st.st_size, st.st_size) for name, st in found if st and st.st_size > 0]
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO files (sha256, size_bytes, bytes_present) VALUES (?, ?, ?)",
                orphans,
            )
