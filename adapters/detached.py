"""Starting a process that belongs to nobody: a new session, its output on a log.

A short ``python -I -S`` launcher starts the command with ``start_new_session``,
prints its pid and exits at once, so the started process is not a child of a
long-lived Python (no zombie, no ResourceWarning) and survives the command
that started it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

LAUNCHER = """
import os, subprocess, sys
try:
    with open(sys.argv[1], "ab") as log:
        child = subprocess.Popen(
            sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
except OSError as exc:
    sys.stdout.write("error: " + str(exc))
    sys.stdout.flush()
    os._exit(1)
sys.stdout.write(str(child.pid))
sys.stdout.flush()
os._exit(0)
"""


def launcher_argv(log_path: Path, command: Sequence[str]) -> tuple[str, ...]:
    """The argv that starts ``command`` detached, appending its output to ``log_path``.

    The launcher prints the started pid (or ``error: ...``) on its stdout.
    """
    return (sys.executable, "-I", "-S", "-c", LAUNCHER, str(log_path), *command)
