"""A model server's log file as ``tail`` and ``tail -f`` read it (``ServerLogFiles``).

Followed, a log that is truncated is read again from its start, one replaced by a new file
is read from the new file's start, and one not there yet is waited for; only whole lines
are given, until the reader stops.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import BinaryIO

from nodeau.ports.runtime import RuntimeFailure

TAIL_BYTES = 1024 * 1024  # how far back the last lines are looked for
POLL_S = 0.2  # how often a quiet log is looked at again


def log_tail(path: Path, lines: int) -> tuple[str, ...]:
    """The last ``lines`` lines of a log (at most the last MiB of it); () when there is none."""
    if lines <= 0:
        return ()
    try:
        with path.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise RuntimeFailure(f"{path}: cannot read the log ({exc.strerror or exc})") from exc
    return tuple(text.splitlines()[-lines:])


def follow_log(
    path: Path,
    lines: int,
    *,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Generator[str, None, None]:
    """The last ``lines`` whole lines of ``path``, then every line appended to it, forever
    (closing the generator closes the file)."""
    log, pending = _open_at_end(path, lines)
    first = pending.split(b"\n")
    pending = first.pop()
    try:
        yield from (_text(line) for line in first[-lines:] if lines > 0)
        while True:
            if log is None:
                log = _open(path)
                if log is None:
                    sleep(poll_s)
                    continue
            chunk = _read(log, path)
            if chunk:
                *whole, pending = (pending + chunk).split(b"\n")
                yield from (_text(line) for line in whole)
                continue
            if _replaced(log, path):
                log.close()
                log, pending = None, b""
                continue
            sleep(poll_s)
    finally:
        if log is not None:
            log.close()


def _open_at_end(path: Path, lines: int) -> tuple[BinaryIO | None, bytes]:
    """The log opened at its end, and the bytes of its last MiB (none when it is not there)."""
    log = _open(path)
    if log is None:
        return None, b""
    end = log.seek(0, os.SEEK_END)
    if lines <= 0:
        return log, b""
    log.seek(max(0, end - TAIL_BYTES))
    return log, _read(log, path)


def _open(path: Path) -> BinaryIO | None:
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RuntimeFailure(f"{path}: cannot read the log ({exc.strerror or exc})") from exc


def _read(log: BinaryIO, path: Path) -> bytes:
    try:
        return log.read()
    except OSError as exc:
        raise RuntimeFailure(f"{path}: cannot read the log ({exc.strerror or exc})") from exc


def _replaced(log: BinaryIO, path: Path) -> bool:
    """Whether the path now names another file, or the file was cut shorter than read."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False  # removed: what was open is kept until a new file appears
    was = os.fstat(log.fileno())
    return (now.st_ino, now.st_dev) != (was.st_ino, was.st_dev) or now.st_size < log.tell()


def _text(line: bytes) -> str:
    return line.decode("utf-8", "replace").removesuffix("\r")


class ServerLogFiles:
    """``ServerLogs``: the log files this machine's model servers write."""

    def tail(self, path: Path, lines: int) -> tuple[str, ...]:
        return log_tail(path, lines)

    def follow(self, path: Path, lines: int) -> Iterator[str]:
        return follow_log(path, lines)
