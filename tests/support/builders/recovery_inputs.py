"""What the recovery rules of the domain are given in the tests: a fleet of three machines.

garage, attic and cp (the control plane), one 24 GiB card each; a service on garage,
its machine's health at ``T0``, the fleet as the scheduler sees it, what a copy needs
and the copies already asked, and the record of a service once moved.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodeau.domain.copies import CopyRequest, with_ask
from nodeau.domain.health import Health, MachineHealth, Signals, assess
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.recovery import CopyNeed
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView
from nodeau.domain.workloads import Recovery, RecoveryMode, Workload, WorkloadKind, WorkloadState
from tests.support.builders.fleets import flat, fleet, gpu, machine

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
GONE = T0 - timedelta(minutes=10)  # both signals last seen ten minutes before T0

FLEET = fleet(
    machine("garage", gpu("G1", 24)),
    machine("attic", gpu("A1", 24)),
    machine("cp", gpu("C1", 24), control_plane=True),
)
LEDGER = Ledger(
    reservations=(Reservation(workload="svc", machine="garage", gpu_uuid="G1", bytes=10 * GIB),)
)


def unreachable_since(since: datetime) -> MachineHealth:
    return MachineHealth(
        state=Health.UNREACHABLE,
        since=since,
        quiet=frozenset(assess(Signals(node_heartbeat_at=None, agent_report_at=None), T0).quiet),
        sentence="unreachable",
    )


REPORTING = assess(Signals(node_heartbeat_at=T0, agent_report_at=T0), T0)
DEGRADED = assess(Signals(node_heartbeat_at=T0, agent_report_at=GONE), T0)


def service(**kw: object) -> Workload:
    values: dict[str, object] = {
        "name": "svc",
        "kind": WorkloadKind.SERVICE,
        "model": "qwen",
        "artifact_id": "a" * 64,
        "machine": "garage",
        "gpu_uuid": "G1",
        "state": WorkloadState.SERVING,
        "since": T0 - timedelta(hours=1),
        "recovery_mode": RecoveryMode.AUTOMATIC,
        **kw,
    }
    return Workload(**values)  # type: ignore[arg-type]


def view(**kw: object) -> FleetView:
    values: dict[str, object] = {
        "fleet": FLEET,
        "ledger": LEDGER,
        "settings": SchedulingSettings(),
        "excluded": (("garage", "unreachable"),),
        "verified_on": frozenset({"garage", "attic", "cp"}),
        "predict": flat(10 * GIB),
        "plan": ENTERPRISE,  # unbounded: these tests are about other rules
        **kw,
    }
    return FleetView(**values)  # type: ignore[arg-type]


ART = "ab" * 32


def need(**changes: object) -> CopyNeed:
    fields: dict[str, object] = {
        "workload": "svc",
        "artifact": ART,
        "name": "qwen",
        "fits_on": frozenset({"attic", "shed"}),
        "verified_on": frozenset({"garage"}),
        **changes,
    }
    return CopyNeed(**fields)  # type: ignore[arg-type]


def asked(*triples: tuple[str, str, str]) -> tuple[CopyRequest, ...]:
    held: tuple[CopyRequest, ...] = ()
    for where, artifact, asker in triples:
        held = with_ask(held, machine=where, artifact=artifact, name="qwen", asker=asker, at=T0)
    return held


S = WorkloadState
FIVE_MINUTES = timedelta(minutes=5)

MOVED = Workload(
    name="svc",
    kind=WorkloadKind.SERVICE,
    model="qwen",
    artifact_id="a" * 64,
    machine="attic",
    gpu_uuid="A1",
    state=S.RECOVERING,
    since=T0,
    recovery_mode=RecoveryMode.AUTOMATIC,
    recovery_after=FIVE_MINUTES,
    recoveries=1,
    last_recovery=Recovery(
        from_machine="garage", to_machine="attic", at=T0, unreachable_since=GONE, after=FIVE_MINUTES
    ),
)


def record_of(w: Workload) -> WorkloadRecord:
    return WorkloadRecord(workload=w, config=RuntimeConfig(context_tokens=4096), model_path="/m")
