"""What the controller's decision for one object is given, built without a cluster.

Machine reports with their cards and verified copies (``report``, ``artifact``), the
fleet's marks, a workload's ask, and the controller's decider with no plan bound; all at
``NOW``, on the artifacts of tests/support/real/kube_controller.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from returns.pipeline import is_successful

from nodeau.adapters.kube.report_form import MachineArtifact, MachineReport
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.fleet_admission import Decide
from nodeau.domain.fleet_admission import decider as controller_decider
from nodeau.domain.fleet_reports import MarkedFleet
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.memory import GIB
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.reservations import Ledger
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from nodeau.ports.state import Admission, Snapshot
from tests.support.builders.summaries import SUMMARY
from tests.support.real.kube_controller import HUGE_ID, SMALL_ID

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SMALL, HUGE = SMALL_ID, HUGE_ID
EMPTY = Snapshot(ledger=Ledger(), workloads=())


def artifact(sha: str, *names: str, gib: int = 4, path: str | None = None) -> MachineArtifact:
    return MachineArtifact(
        id=sha,
        names=names,
        size_bytes=gib * GIB,
        path=path or f"/var/lib/nodeau/models/{sha[:8]}/model.gguf",
        summary=SUMMARY,
    )


def report(machine: str, cards: int, *artifacts: MachineArtifact, gib: int = 24) -> MachineReport:
    gpus = tuple(
        GpuReading(
            gpu=Gpu(uuid=f"GPU-{machine}-{i}", model="NVIDIA L4", total_bytes=gib * GIB),
            free_bytes=gib * GIB,
            driver_version="550",
        )
        for i in range(cards)
    )
    reading = MachineReading(machine=machine, gpus=gpus, simulated=True, note="")
    return MachineReport(reading=reading, at=NOW, artifacts=artifacts)


def marks(*nodes: str, drained: tuple[str, ...] = (), **kw: Any) -> MarkedFleet:
    return MarkedFleet(
        nodes=nodes,
        drained=frozenset(drained),
        upgrading=frozenset(),
        control_plane=frozenset(),
        settings=kw.get("settings", SchedulingSettings()),
    )


def ask(
    name: str = "chat", model: str = "qwen", kind: WorkloadKind = WorkloadKind.SERVICE
) -> WorkloadAsk:
    return WorkloadAsk(
        kind=kind,
        name=name,
        model=model,
        task=Task.CHAT,
        context_tokens=None,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(seconds=180),
        endpoint_stopped=False,
    )


def admitted(result: Any) -> Admission:
    assert is_successful(result), result
    value: Admission = result.unwrap()
    return value


def decider(wanted: WorkloadAsk, **kw: Any) -> Decide:
    """The controller's decision with no plan bound (these tests are about other rules)."""
    return controller_decider(wanted, plan=ENTERPRISE, **kw)
