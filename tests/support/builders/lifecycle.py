"""Workload records for the lifecycle tests: a chat service serving on m1 since ``SINCE``.

``record`` builds one with any field changed; ``serving`` is that service's workload
as a server restarted in place finds it (serving since ``UP_AT``), and ``OOM`` the end
its kubelet reports at ``ENDED``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from attrs import evolve

from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import ServerExit, Workload, WorkloadKind, WorkloadState

S = WorkloadState

SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH

SINCE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def record(**workload: object) -> WorkloadRecord:
    fields: dict[str, object] = {
        "name": "chat",
        "kind": SERVICE,
        "model": "qwen",
        "artifact_id": "ab" * 32,
        "machine": "m1",
        "gpu_uuid": "GPU-1",
        "state": S.SERVING,
        "since": SINCE,
        **workload,
    }
    return WorkloadRecord(
        workload=Workload(**fields),  # type: ignore[arg-type]
        config=RuntimeConfig(task=Task.CHAT, context_tokens=4096),
        model_path="/models/qwen.gguf",
    )


UP_AT = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)  # serving since
ENDED = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)

OOM = ServerExit.killed(9, "OOMKilled", ENDED)


def serving(**fields: Any) -> Workload:
    return evolve(record(since=UP_AT).workload, **fields)
