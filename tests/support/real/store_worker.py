"""One model-store operation in a process of its own, for tests that kill it part-way.

Usage: python store_worker.py ROOT MODE SOURCE, MODE ``import``, ``import-copy`` (``os.link``
failing, so it copies) or ``fetch`` (resume, append, commit). It prints ``ready`` before opening
the store and ``done SECONDS`` (opening and operation) at the end.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.domain.artifacts import ArtifactFile, Sha256

MACHINE = "m1"
MODES = ("import", "import-copy", "fetch")
CHUNK_BYTES = 64 * 1024


def cross_device(*_args: object, **_kwargs: object) -> None:
    """``os.link`` as it fails when the cache is on another file system."""
    raise OSError(errno.EXDEV, "Invalid cross-device link")


def run(root: Path, mode: str, source: Path, clock: Callable[[], datetime]) -> Sha256:
    """Carry out one operation; ``import-copy`` expects ``os.link`` to fail already."""
    with FilesystemModelStore(root, MACHINE, reserve_bytes=0, clock=clock) as store:
        if mode == "fetch":
            return simulated_fetch(store, source)
        return store.import_file(source).sha256


def simulated_fetch(store: FilesystemModelStore, source: Path) -> Sha256:
    """What a fetcher does: append what is missing to the partial file, hash it all, commit."""
    data = source.read_bytes()
    expected = ArtifactFile(path=source.name, size_bytes=len(data), sha256=Sha256.of_bytes(data))
    with store.exclusive_fetch(lambda _sentence: None):
        partial = store.partial(expected)
        hasher = hashlib.sha256(partial.path.read_bytes()[: partial.bytes_present])
        with partial.path.open("ab", buffering=0) as out:
            for start in range(partial.bytes_present, len(data), CHUNK_BYTES):
                chunk = memoryview(data)[start : start + CHUNK_BYTES]
                hasher.update(chunk)
                while chunk:
                    chunk = chunk[out.write(chunk) or 0 :]
        store.commit(expected, Sha256(hex=hasher.hexdigest()))
    return expected.sha256


def main(argv: list[str]) -> None:
    root, mode, source = Path(argv[0]), argv[1], Path(argv[2])
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {MODES}, not {mode!r}")
    if mode == "import-copy":
        os.link = cross_device
    print("ready", flush=True)
    started = time.perf_counter()
    run(root, mode, source, lambda: datetime.now(UTC))
    print(f"done {time.perf_counter() - started:.6f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
