"""Recovery in the fleet: the domain's decision for each service on an unreachable machine.

Why it is so: docs/adr/decisions/apps-controller.md (recover.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from attrs import evolve
from returns.result import Failure, Result, Success

from nodeau.apps.controller.reading import FleetInputs
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.fleet_admission import Planning, fleet_of, planning, still_permitted
from nodeau.domain.hardware import Fleet
from nodeau.domain.health import Health, MachineHealth
from nodeau.domain.records import Admission, Snapshot
from nodeau.domain.recovery import (
    RecoveryAction,
    RecoveryDecision,
    before_placing,
    decide_recovery,
    fleet_alarm,
    guarded,
    held_record,
    moved_admission,
    no_plan,
    with_recovery,
)
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import RecoveryMode, Workload, WorkloadKind, holds_gpu
from nodeau.ports.state import MovingStateStore, WorkloadRecord
from nodeau.ports.workload_objects import WorkloadObjects


class Recoverer:
    """Decides and records recovery for the services on unreachable machines."""

    def __init__(
        self,
        *,
        store: MovingStateStore,
        objects: WorkloadObjects,
        clock: Callable[[], datetime],
        log: Callable[[str], None],
    ) -> None:
        self._store = store
        self._objects = objects
        self._clock = clock
        self._log = log

    def recover(self, snapshot: Snapshot, inputs: FleetInputs) -> datetime | None:
        """One decision for each automatic service whose machine is unreachable; the
        earliest moment one of them waiting for its delay is due (the controller wakes
        then, so a recovery is decided when it is due, not at the next resync)."""
        alarm = fleet_alarm(inputs.health)
        fleet = fleet_of(inputs.reports, inputs.marks)  # once per pass, not per service
        due: list[datetime] = []
        for record in due_for_a_decision(snapshot.workloads, inputs):
            health = inputs.health[record.workload.machine]
            fires = self.decide(record, health, inputs, snapshot.ledger, alarm, fleet)
            if fires is not None:
                due.append(fires)
        return min(due) if due else None

    def decide(
        self,
        record: WorkloadRecord,
        health: MachineHealth,
        inputs: FleetInputs,
        ledger: Ledger,
        alarm: str | None,
        fleet: Fleet | None = None,
    ) -> datetime | None:
        """Decide for one service and record it; when it waits for its delay, when that
        delay is up. The choice decided by is the spec's (a person may have changed it
        since the record was last written: a move is never made on an old choice)."""
        now = self._clock()
        obj = self._objects.get(record.workload.kind, record.workload.name)
        if obj is None or obj.ask is None or obj.deleting:
            return None  # being deleted, or its spec does not read: nothing to recover
        record = chosen(record, obj.ask)
        w = record.workload
        if w.recovery_mode is not RecoveryMode.AUTOMATIC:
            return None  # set to never since: the health pass holds it once recorded
        ask = evolve(obj.ask, model=w.artifact_id)  # the same bytes, whatever the name means now
        control_plane = w.machine if w.machine in inputs.marks.control_plane else None
        decision = before_placing(w, health, now, control_plane)
        plan: Result[Planning, Refusal] | None = None
        if decision is None:  # due: only now is the fleet planned for it
            plan = planning(
                ask,
                reports=inputs.reports,
                marks=inputs.marks,
                health=inputs.health,
                fleet=fleet,
                plan=inputs.plan,
                organisation=inputs.organisation,
                table=inputs.table,
                cuda_image=inputs.cuda_image,
            ).bind(lambda found: still_permitted(found, inputs.organisation))
            decision = placed_or_held(w, plan, health, now, ledger, control_plane)
        decision = guarded(decision, w, alarm)
        if decision.action is RecoveryAction.RECOVER and isinstance(plan, Success):
            self._move(record, ask, plan.unwrap(), health, now)
        elif decision.action is RecoveryAction.HOLD:
            self._hold(record, decision, health)
        return decision.fires_at

    def _move(
        self,
        record: WorkloadRecord,
        ask: WorkloadAsk,
        plan: Planning,
        health: MachineHealth,
        now: datetime,
    ) -> None:
        name = record.workload.name

        def decide(snapshot: Snapshot, before: WorkloadRecord) -> Result[Admission, Refusal]:
            placed = plan.admission(ask, snapshot.ledger, now)
            moving = chosen(before, ask)
            return placed.map(lambda found: moved_admission(found, moving, health, now))

        match self._store.move(name, decide):
            case Success(Admission() as moved):
                w = moved.record.workload
                self._log(f"{name}: recovering on {w.machine} ({moved.placement.why})")
            case Failure(Refusal() as refusal):
                self._log(f"{name}: not moved this time: {refusal.sentence}")

    def _hold(
        self, record: WorkloadRecord, decision: RecoveryDecision, health: MachineHealth
    ) -> None:
        if held_record(record, decision, health) is None:
            return
        name = record.workload.name

        def change(current: WorkloadRecord) -> WorkloadRecord:
            return held_record(current, decision, health) or current

        self._store.update(name, change)
        self._log(f"{name}: held ({decision.sentence})")


def chosen(record: WorkloadRecord, ask: WorkloadAsk) -> WorkloadRecord:
    """The record with the spec's recovery choice (unchanged when it is the same)."""
    w = record.workload
    if (w.recovery_mode, w.recovery_after) == (ask.recovery, ask.recovery_after):
        return record
    return evolve(record, workload=with_recovery(w, ask.recovery, ask.recovery_after))


def placed_or_held(
    w: Workload,
    plan: Result[Planning, Refusal],
    health: MachineHealth,
    now: datetime,
    ledger: Ledger,
    control_plane: str | None,
) -> RecoveryDecision:
    """The domain's decision once a recovery is due: a placement elsewhere, or held."""
    match plan:
        case Success(Planning() as found):
            return decide_recovery(w, found.request, health, now, found.view(ledger), control_plane)
        case Failure(Refusal() as refusal):
            return no_plan(w, refusal)
    raise AssertionError("planning answers a Result")


def due_for_a_decision(
    records: Iterable[WorkloadRecord], inputs: FleetInputs
) -> tuple[WorkloadRecord, ...]:
    """The automatic services holding a card on a machine assessed unreachable."""
    return tuple(
        record
        for record in records
        if record.workload.kind is WorkloadKind.SERVICE
        and record.workload.recovery_mode is RecoveryMode.AUTOMATIC
        and holds_gpu(record.workload.state)
        and (h := inputs.health.get(record.workload.machine)) is not None
        and h.state is Health.UNREACHABLE
    )
