"""Workloads for the restart tests: the ``tiny`` service serving on m1 since 09:00:00.

``at`` reads a time of the test day ("09:30:05", UTC); ``serving`` builds the service
with any field changed; ``KILLED`` is its server killed by SIGKILL at 09:30:05.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodeau.domain.workloads import ServerExit, Workload, WorkloadKind, WorkloadState

S = WorkloadState
GPU = "GPU-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"


def at(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(2026, 11, 30, h, m, s, tzinfo=UTC)


def serving(**changes: Any) -> Workload:
    fields: dict[str, Any] = {
        "name": "tiny",
        "kind": WorkloadKind.SERVICE,
        "model": "tiny",
        "artifact_id": "9f2c",
        "machine": "m1",
        "gpu_uuid": GPU,
        "state": S.SERVING,
        "since": at("09:00:00"),
    }
    fields.update(changes)
    return Workload(**fields)


KILLED = ServerExit.killed(9, "SIGKILL", at("09:30:05"))
