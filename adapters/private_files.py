"""A user's data under NODEAU_HOME is theirs alone, whatever umask Nodeau was started with,
and a file Nodeau rewrites is written whole or not at all.

Why it is so: docs/adr/decisions/adapters.md (private_files.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

PRIVATE_UMASK = 0o077
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
SHARED_ENTRIES = frozenset({"models"})  # the model cache: content-addressed, nothing secret
_OTHERS = 0o077  # the group and other permission bits


def keep_private(home: Path | None) -> int:
    """Set this process's umask to 077 and close ``home`` (``close_home``) when one is given;
    returns the umask it replaced."""
    previous = os.umask(PRIVATE_UMASK)
    if home is not None:
        close_home(home)
    return previous


@contextmanager
def private_files(home: Path | None) -> Iterator[None]:
    """``keep_private`` for the length of a block, the umask it replaced set back after it
    (for an entry point that is also called in-process)."""
    previous = keep_private(home)
    try:
        yield
    finally:
        os.umask(previous)


def close_home(home: Path) -> None:
    """Take the group and other bits off ``home``; when it had any, off everything under it
    too, except ``SHARED_ENTRIES`` and symbolic links. Nothing is created. A home that is not
    this user's, a shared folder (sticky bit, as /tmp) or the user's home folder itself (or
    one above it) is left as it is; so is anything under it that cannot be changed."""
    try:
        found = home.stat()
    except OSError:
        return  # not there yet: whatever creates it creates it under umask 077
    mode = stat.S_IMODE(found.st_mode)
    if not stat.S_ISDIR(found.st_mode) or not mode & _OTHERS or not _ours_alone(home, found):
        return
    _take_others_bits(home, mode)
    for folder, subfolders, files in os.walk(home):
        if Path(folder) == home:
            subfolders[:] = [s for s in subfolders if s not in SHARED_ENTRIES]
        for name in (*subfolders, *files):
            path = Path(folder) / name
            with suppress(OSError):
                entry = path.lstat()
                if not stat.S_ISLNK(entry.st_mode):
                    _take_others_bits(path, stat.S_IMODE(entry.st_mode))


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` as the whole of ``path``, mode 0600 even if it was there before."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def written_beside(path: Path, data: bytes) -> Path:
    """``data`` in a new file beside ``path`` (mode 0600, on disk before this returns); its
    path. Nothing is left behind when it fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # os.urandom, not secrets: ``nodeau ps`` imports this module, and secrets costs it 4 ms
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def replace_whole(path: Path, data: bytes) -> None:
    """``data`` as the whole of ``path``, mode 0600: written beside it and renamed over it,
    so a reader or a crash sees the old bytes or the new, never a part."""
    tmp = written_beside(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _ours_alone(home: Path, found: os.stat_result) -> bool:
    if found.st_uid != os.geteuid() or found.st_mode & stat.S_ISVTX:
        return False
    try:
        user_home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):
        return True  # no home folder known: nothing it could be
    return home.resolve() not in (user_home, *user_home.parents)


def _take_others_bits(path: Path, mode: int) -> None:
    if mode & _OTHERS:
        with suppress(OSError):
            os.chmod(path, mode & ~_OTHERS)
