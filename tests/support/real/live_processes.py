"""Which processes on this machine run with a given argument (read from /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def naming(argument: str | Path) -> list[int]:
    """Pids of the running processes whose command line has ``argument`` as one of its
    arguments (a zombie's command line is empty: it is not counted)."""
    wanted = os.fsencode(str(argument))
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in args:
            found.append(int(entry.name))
    return found
