"""Hashing files: the one way Nodeau computes the SHA-256 of bytes on disk.

Why it is so: docs/adr/decisions/adapters.md (hashing.py).
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from nodeau.domain.artifacts import Sha256

if TYPE_CHECKING:
    from hashlib import _Hash

READ_BYTES = 4 * 1024 * 1024
"""Bytes per read: large enough that per-call costs vanish, small enough to stay in cache."""
BUFFER_BYTES = 8 * 1024 * 1024
"""Bytes per read while the store hashes a file (``pump``): hashlib releases the GIL on
buffers this large, so a copy hashes as it writes."""


def feed_file(hasher: _Hash, path: Path, *, limit: int | None = None) -> int:
    """Update ``hasher`` with the first ``limit`` bytes of ``path`` (all of it when None).

    Returns how many bytes were hashed: fewer than ``limit`` when the file is
    shorter. Raises OSError when the file cannot be read.
    """
    buffer = bytearray(READ_BYTES)
    view = memoryview(buffer)
    remaining = limit
    hashed = 0
    with path.open("rb", buffering=0) as source:
        while remaining is None or remaining > 0:
            want = READ_BYTES if remaining is None else min(READ_BYTES, remaining)
            count = source.readinto(view[:want])
            if not count:
                break
            hasher.update(view[:count])
            hashed += count
            if remaining is not None:
                remaining -= count
    return hashed


def hash_file(path: Path) -> Sha256:
    """The SHA-256 of the whole file at ``path``; raises OSError when it cannot be read."""
    hasher = hashlib.sha256()
    feed_file(hasher, path)
    return Sha256(hex=hasher.hexdigest())


def pump(
    fd: int,
    hasher: _Hash,
    sink: int | None = None,
    read: Callable[[int], None] | None = None,
) -> int:
    """Hash everything readable from ``fd`` (writing it to ``sink`` too, telling ``read``
    the count so far); returns the count."""
    view = memoryview(bytearray(BUFFER_BYTES))
    total = 0
    with open(fd, "rb", buffering=0, closefd=False) as source:
        while count := source.readinto(view):
            chunk = view[:count]
            hasher.update(chunk)
            while sink is not None and chunk:
                chunk = chunk[os.write(sink, chunk) :]
            total += count
            if read is not None:
                read(total)
    return total


def hash_open_file(
    fd: int, read: Callable[[int], None] | None = None
) -> tuple[Sha256, os.stat_result, os.stat_result]:
    """The SHA-256 of an open file, with its stat from before and after the read."""
    before = os.fstat(fd)
    hasher = hashlib.sha256()
    pump(fd, hasher, read=read)
    return Sha256(hex=hasher.hexdigest()), before, os.fstat(fd)


class HashingThread:
    """Feeds a hasher on a worker thread; ``with`` starts it and waits for it to finish.

    The queue holds at most ``depth`` batches, so a receiver that outruns the
    hasher waits instead of piling bytes up in memory. The hasher is only
    touched by the worker until the ``with`` block has ended.
    """

    def __init__(self, hasher: _Hash, *, depth: int = 8) -> None:
        self._hasher = hasher
        self._batches: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=depth)
        self._worker = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._failure: BaseException | None = None

    def __enter__(self) -> HashingThread:
        self._worker.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._batches.put(None)
        self._worker.join()
        if self._failure is not None and exc is None:
            raise self._failure

    def feed(self, pieces: list[bytes]) -> None:
        """Hash these pieces after every batch fed before (waits while the queue is full)."""
        self._batches.put(pieces)

    def _run(self) -> None:
        while (pieces := self._batches.get()) is not None:
            if self._failure is not None:
                continue  # keep draining so a feeder never waits on a dead worker
            try:
                for piece in pieces:
                    self._hasher.update(piece)
            except BaseException as exc:  # handed to the feeding thread
                self._failure = exc
