"""Which Kubernetes Pod a process runs in, from the kernel's ``/proc/PID/cgroup``.

Why it is so: docs/adr/decisions/adapters.md (pod_cgroup.py).
"""

from __future__ import annotations

import re
from pathlib import Path

_HEX = "[0-9a-fA-F]"
_HASH = f"{_HEX}{{32}}"  # a static Pod's UID: its config hash


def _uuid(dash: str) -> str:
    return dash.join(f"{_HEX}{{{n}}}" for n in (8, 4, 4, 4, 12))


# one path segment naming a Pod: cgroupfs ``pod<uid>``; systemd ``<prefix>-pod<uid>.slice``
_CGROUPFS = re.compile(rf"^pod(?P<uid>{_uuid('-')}|{_HASH})$")
_SYSTEMD = re.compile(rf"^(?:[a-z0-9]+-)+pod(?P<uid>{_uuid('_')}|{_HASH})\.slice$")


def _segment_uid(segment: str) -> str | None:
    found = _CGROUPFS.match(segment) or _SYSTEMD.match(segment)
    return None if found is None else found["uid"].lower().replace("_", "-")


def _path_uid(path: str) -> str | None:
    """The Pod UID one cgroup path names, or None."""
    found = {uid for s in path.split("/") if (uid := _segment_uid(s)) is not None}
    return found.pop() if len(found) == 1 else None


def pod_uid(text: str) -> str | None:
    """The UID of the Pod that ``/proc/PID/cgroup``'s ``text`` puts the process in, or None
    (not in a Pod, or lines that disagree)."""
    found: set[str] = set()
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        uid = _path_uid(parts[2].strip())
        if uid is not None:
            found.add(uid)
    return found.pop() if len(found) == 1 else None


class ProcCgroupPods:
    """``ports.hardware.ProcessPods`` on ``<proc>/PID/cgroup`` (the host's ``/proc``: the
    agent runs in the host's PID namespace, as NVML names host PIDs)."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._proc = proc

    def pod_of(self, pid: int) -> str | None:
        try:
            text = (self._proc / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
        except OSError:  # ended, or not ours to read: no Pod is named
            return None
        return pod_uid(text)
