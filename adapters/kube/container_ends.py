"""How a model-server container ended and how often it restarted, read from the status the
kubelet writes: an exit code, a signal, OOMKilled, a CrashLoopBackOff's announced wait.

Why it is so: docs/adr/decisions/adapters-kube.md (pods.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from nodeau.domain.lifecycle import ServerRestarts
from nodeau.domain.workloads import ServerExit

OOM_KILLED = "OOMKilled"  # the kubelet's reason for a container the kernel killed for memory
CRASH_LOOP = "CrashLoopBackOff"
SIGKILL = 9
SIGNALS = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS",
    8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
}  # fmt: skip
SIGNAL_CODES = range(129, 129 + 64)  # 128+N: killed by signal N (1 to 64 on Linux)
_BACKOFF = re.compile(r"back-off ((?:\d+(?:\.\d+)?(?:h|ms|m|s))+) restarting")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def moment(text: object) -> datetime | None:
    """A moment as the API server writes one (RFC 3339), or None."""
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


def container_exit(code: int, signal: int | None, reason: str | None, at: datetime) -> ServerExit:
    """How a container ended, from what its terminated state says, in the domain's words."""
    if reason == OOM_KILLED:
        return ServerExit.killed(SIGKILL, OOM_KILLED, at)
    if signal:
        return ServerExit.killed(signal, SIGNALS.get(signal), at)
    if code in SIGNAL_CODES:
        return ServerExit.killed(code - 128, SIGNALS.get(code - 128), at)
    return ServerExit.exited(code, at)


def announced_backoff(message: str | None) -> timedelta | None:
    """The wait a kubelet's CrashLoopBackOff message announces ("back-off 1m20s restarting
    failed container=..."), when it reads."""
    found = _BACKOFF.search(message or "")
    if found is None:
        return None
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(found.group(1)))
    return timedelta(seconds=seconds)


def restarts_of(container: Mapping[str, Any] | None) -> ServerRestarts:
    """What a container status (plain JSON; None: not reported yet) says of the server's
    ends and restarts."""
    if container is None:
        return ServerRestarts()
    state, last = container.get("state") or {}, container.get("lastState") or {}
    count = int(container.get("restartCount") or 0)
    now_ended = state.get("terminated")
    ended = now_ended or last.get("terminated")
    finished = None if ended is None else moment(ended.get("finishedAt"))
    started = None if ended is None else moment(ended.get("startedAt"))
    when = finished or started
    if ended is None or when is None:
        return ServerRestarts(count=count)
    waiting, running = state.get("waiting"), state.get("running")
    ran = finished - started if finished and started else None
    crash_loop = waiting is not None and waiting.get("reason") == CRASH_LOOP
    announced = announced_backoff(waiting.get("message")) if waiting and crash_loop else None
    down = now_ended is not None or waiting is not None
    return ServerRestarts(
        count=count,
        last_exit=container_exit(
            int(ended.get("exitCode") or 0), ended.get("signal"), ended.get("reason"), when
        ),
        ran_for=ran if ran is not None and ran >= timedelta(0) else None,
        down=down,
        backing_off=crash_loop,
        backoff=announced,
        running_since=None if down or running is None else moment(running.get("startedAt")),
    )


def waits_after_an_end(container: Mapping[str, Any]) -> bool:
    state, last = container.get("state") or {}, container.get("lastState") or {}
    return state.get("waiting") is not None and last.get("terminated") is not None
