"""The model store's steps on the file system: a file opened to be read as a model, the
fingerprint that says it has not changed since, and a rename that survives a crash.

Why it is so: docs/adr/decisions/adapters.md (fs_store.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nodeau.ports.models import ModelFileError

Fingerprint = tuple[int, int, int]


def fingerprint(st: os.stat_result) -> Fingerprint:
    """What must stay the same for an earlier check of a file to still hold."""
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def regular_stat(path: Path) -> os.stat_result | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def fsync_path(path: Path, flags: int = 0) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_durably(source: Path, target: Path) -> None:
    os.replace(source, target)
    fsync_path(target.parent, os.O_DIRECTORY)
    if source.parent != target.parent:
        fsync_path(source.parent, os.O_DIRECTORY)


def os_problem(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def open_model_file(source: Path) -> tuple[int, os.stat_result]:
    """An open descriptor on a readable, non-empty regular file, and its stat."""
    try:
        # O_NONBLOCK: opening a FIFO must not hang; it changes nothing for a regular file
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise ModelFileError(source, "no such file") from exc
    except OSError as exc:
        raise ModelFileError(source, f"cannot be read ({os_problem(exc)})") from exc
    st = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(st.st_mode):
        problem = "is a directory, not a model file"
    elif not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_size == 0:
        problem = "is empty"
    if problem is not None:
        os.close(fd)
        raise ModelFileError(source, problem)
    return fd, st
