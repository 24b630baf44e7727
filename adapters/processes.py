"""Processes Nodeau started, found again and stopped later, from any process, through psutil.

Why it is so: docs/adr/decisions/adapters.md (processes.py).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import psutil
from attrs import frozen

from nodeau.ports.errors import NodeauError

if TYPE_CHECKING:
    from nodeau.domain.records import Starter

SAME_START_S = 1.0
KILL_WAIT_S = 5.0
_POLL_S = 0.05
_EXEC_WAIT_S = 0.5
_EXEC_POLL_S = 0.005


class ProcessError(NodeauError):
    """A process of ours could not be stopped."""

    def __init__(self, message: str, *, pid: int) -> None:
        super().__init__(message)
        self.pid = pid


class ProcessDenied(ProcessError):
    """No permission to signal the process (it runs as someone else)."""


class ProcessSurvived(ProcessError):
    """The process was still there after SIGKILL and the wait that followed."""


@frozen(kw_only=True)
class OurProcess:
    """How to know a pid is still the process we started: each fact given must hold."""

    pid: int
    created_at: float | None = None  # psutil's create_time, read when it started
    command: tuple[str, ...] | None = None  # its exact command line
    matches: Callable[[tuple[str, ...]], bool] | None = None  # a test of its command line
    group: int | None = None  # the process group it must be in


def start_time(pid: int) -> float | None:
    """The start time (psutil's ``create_time``) of the process running as ``pid``, to
    record in its ``OurProcess``; None when none runs there."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.create_time()
    except (psutil.Error, ValueError):  # NoSuchProcess, ZombieProcess, AccessDenied
        return None


def this_starter() -> Starter:
    """This process, as the one starting a model server (its pid and start time)."""
    from nodeau.domain.records import Starter  # not at import: ``ps`` imports this module

    return Starter(pid=os.getpid(), created_at=start_time(os.getpid()))


def alive(ours: OurProcess) -> bool:
    """Whether the process runs and is still ours (a reused pid is not; a zombie does not run)."""
    return _find(ours) is not None


def send(ours: OurProcess, sig: signal.Signals, *, group: bool = False) -> bool:
    """Send ``sig`` while the process is ours (``group``: to its whole group when it leads
    one); whether it was sent. ``ProcessDenied`` when that is not permitted."""
    process = _find(ours)
    if process is None:
        return False
    try:
        if group and ours.pid != os.getpgrp() and os.getpgid(ours.pid) == ours.pid:
            os.killpg(ours.pid, sig)
        else:
            process.send_signal(sig)  # psutil refuses a pid reused since it was found
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False
    except (psutil.AccessDenied, PermissionError) as exc:
        raise ProcessDenied(f"pid {ours.pid}: no permission to signal it", pid=ours.pid) from exc
    return True


def signal_group(group: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to every process in process group ``group``; whether any got it. Never
    to this process's own group, nor to a group id that names no single group (0, 1)."""
    if group <= 1 or group == os.getpgrp():
        return False
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_gone(processes: Iterable[OurProcess], timeout_s: float) -> bool:
    """Wait until none of ``processes`` is ours any more, at most ``timeout_s``; whether so."""
    waiting = list(processes)
    deadline = time.monotonic() + timeout_s
    while True:
        found = [p for p in map(_find, waiting) if p is not None]
        if not found:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:  # returns as soon as it ends (and collects it, if it is our child)
            found[0].wait(timeout=min(_POLL_S, left))
        except psutil.TimeoutExpired:
            pass  # still there, or a zombie that is not ours to collect
        except psutil.Error:
            pass  # gone, or not ours to wait for: the next look says which


def terminate(
    ours: OurProcess, grace_s: float, *, group: bool = False, kill_wait_s: float = KILL_WAIT_S
) -> bool:
    """Stop the process: SIGTERM, up to ``grace_s`` for it to end, then SIGKILL (``kill``).
    Whether it was running; a process that is gone (or not ours) is left alone."""
    if not send(ours, signal.SIGTERM, group=group):
        return False
    if not wait_gone([ours], grace_s):
        kill(ours, group=group, wait_s=kill_wait_s)
    return True


def kill(ours: OurProcess, *, group: bool = False, wait_s: float = KILL_WAIT_S) -> None:
    """SIGKILL the process while it is ours, then wait up to ``wait_s`` for it to be gone;
    ``ProcessSurvived`` when it is still there."""
    send(ours, signal.SIGKILL, group=group)
    if not wait_gone([ours], wait_s):
        raise ProcessSurvived(f"pid {ours.pid} still runs after SIGKILL", pid=ours.pid)


def rss(ours: OurProcess) -> int | None:
    """Its resident set size in bytes; None when it is not ours or cannot be read."""
    process = _find(ours)
    if process is None:
        return None
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return None


def listens(ours: OurProcess, host: str, port: int) -> bool | None:
    """Whether ``ours`` holds the listening socket on ``host:port``; None when its sockets
    cannot be read (another user's process). A foreign process that holds the port answers
    there too: a readiness answer counts only from a port ours holds."""
    process = _find(ours)
    if process is None:
        return False
    try:
        sockets = process.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return None
    except psutil.Error:
        return False
    return any(
        c.status == psutil.CONN_LISTEN and c.laddr and tuple(c.laddr) == (host, port)
        for c in sockets
    )


def _find(ours: OurProcess) -> psutil.Process | None:
    """The running process at ``ours.pid`` when every recorded fact still holds, else None."""
    if ours.pid <= 0:
        return None  # 0 and negative pids name groups to os.kill, never one process
    try:
        process = psutil.Process(ours.pid)
    except (psutil.Error, ValueError):
        return None
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.AccessDenied:
        pass  # it exists; its other facts decide
    except psutil.Error:
        return None
    try:
        if ours.created_at is not None and (
            abs(process.create_time() - ours.created_at) > SAME_START_S
        ):
            return None
        if ours.command is not None or ours.matches is not None:
            argv = _command_line(process)
            if ours.command is not None and argv != ours.command:
                return None
            if ours.matches is not None and not ours.matches(argv):
                return None
        if ours.group is not None and os.getpgid(ours.pid) != ours.group:
            return None
    except (psutil.Error, OSError):
        return None  # gone meanwhile, or a fact that cannot be read is not a fact that holds
    return process


def _command_line(process: psutil.Process) -> tuple[str, ...]:
    """Its command line, read again while it is empty (for a moment while it execs)."""
    deadline = time.monotonic() + _EXEC_WAIT_S
    while not (argv := tuple(process.cmdline())) and time.monotonic() < deadline:
        time.sleep(_EXEC_POLL_S)
    return argv


def running_with(matches: Callable[[tuple[str, ...]], bool]) -> tuple[OurProcess, ...]:
    """Every process of this user running now whose command line ``matches``, each as an
    ``OurProcess`` with its start time and command line."""
    found: list[OurProcess] = []
    me = os.getuid()
    for process in psutil.process_iter(["pid", "uids", "cmdline", "create_time", "status"]):
        info = process.info
        uids = info.get("uids")
        argv = tuple(info.get("cmdline") or ())
        if uids is None or uids.real != me or info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        if argv and matches(argv):
            found.append(
                OurProcess(pid=info["pid"], created_at=info.get("create_time"), command=argv)
            )
    return tuple(found)
