"""Starting a process that belongs to nobody: a new session, its output on a log.

Why it is so: docs/adr/decisions/adapters.md (detached.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

LAUNCHER = """
import os, subprocess, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab") as log:
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

# Runs as `python -I -S -c REAPER PID STATUS_FILE FD` in the process that started PID; it
# tells the launcher PID on FD (its pipe) once it runs, so that when the launcher answers no
# process but the command names the command's arguments.
REAPER = """
import json, os, signal, sys, time
pid, path, told = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
try:
    os.write(told, str(pid).encode())
    os.close(told)
except OSError:
    pass  # the launcher is gone: the reaper's work stands without it
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
    except ChildProcessError:
        os._exit(1)
code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
try:
    name = signal.Signals(number).name if number is not None else None
except ValueError:
    name = None
said = {"pid": pid, "code": code, "signal": number, "signal_name": name, "at": time.time()}
with open(path + ".partial", "w") as f:
    json.dump(said, f)
os.replace(path + ".partial", path)
os._exit(0)
"""

# Runs as `python -I -S -c REAPING_LAUNCHER LOG STATUS_FILE COMMAND...`.
REAPING_LAUNCHER = f"""
import os, subprocess, sys
REAPER = {REAPER!r}
log_path, status_path, command = sys.argv[1], sys.argv[2], sys.argv[3:]
read, write = os.pipe()
if os.fork() == 0:
    try:
        os.close(read)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            os.unlink(status_path)
        except OSError:
            pass
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(log_fd, "ab") as log:
            child = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
    except OSError as exc:
        os.write(write, ("error: " + str(exc)).encode())
        os._exit(1)
    os.set_inheritable(write, True)  # the reaper tells the pid: this argv is gone by then
    try:
        os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", REAPER,
                                  str(child.pid), status_path, str(write)])
    finally:
        child.kill()  # no reaper: the launcher says it failed, so nothing may run
        os._exit(1)
os.close(write)
said = b""
while True:
    chunk = os.read(read, 4096)
    if not chunk:
        break
    said += chunk
sys.stdout.write(said.decode("utf-8", "replace"))
sys.stdout.flush()
os._exit(0 if said.isdigit() else 1)
"""


@frozen(kw_only=True)
class ProcessEnd:
    """How a reaped process ended, as its reaper wrote it."""

    pid: int
    code: int | None  # its exit status, when it exited
    signal: int | None  # the signal that ended it, when one did
    signal_name: str | None
    at: float  # seconds since the epoch


def read_status(path: Path, pid: int) -> ProcessEnd | None:
    """How process ``pid`` ended, from the status file its reaper wrote; None when there is
    none, it is about another pid, or it cannot be read."""
    try:
        said = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or said.get("pid") != pid:
        return None
    code, number, name, at = (said.get(k) for k in ("code", "signal", "signal_name", "at"))
    if not isinstance(at, int | float) or isinstance(at, bool):
        return None
    if not (isinstance(code, int) or isinstance(number, int)):
        return None
    return ProcessEnd(
        pid=pid,
        code=code if isinstance(code, int) else None,
        signal=number if isinstance(number, int) else None,
        signal_name=name if isinstance(name, str) else None,
        at=float(at),
    )


def launcher_argv(log_path: Path, command: Sequence[str]) -> tuple[str, ...]:
    """The argv that starts ``command`` detached, appending its output to ``log_path``.

    The launcher prints the started pid (or ``error: ...``) on its stdout.
    """
    return (sys.executable, "-I", "-S", "-c", LAUNCHER, str(log_path), *command)


def reaped_launcher_argv(
    log_path: Path, status_path: Path, command: Sequence[str]
) -> tuple[str, ...]:
    """As ``launcher_argv``, leaving a reaper that writes how ``command`` ended to
    ``status_path`` (``read_status`` reads it)."""
    return (
        sys.executable, "-I", "-S", "-c", REAPING_LAUNCHER, str(log_path), str(status_path),
        *command,
    )  # fmt: skip
