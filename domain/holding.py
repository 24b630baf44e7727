"""A workload held while its machine stops answering, and resumed when it answers again.

Only a workload that waits whatever happens is held here (a batch job, a service whose
recovery is ``never``); one set to recover is recovery's. Nothing is stopped, moved or
restarted: the record says so (docs/adr/0008-recovery.md).
"""

from __future__ import annotations

from datetime import datetime

from attrs import evolve

from nodeau.domain.health import Health, MachineHealth
from nodeau.domain.lifecycle import with_state
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.recovery import RecoveryAction, answering, wait_without_moving
from nodeau.domain.workloads import Workload, WorkloadState, holds_gpu


def held_while_away(record: WorkloadRecord, health: MachineHealth) -> WorkloadRecord | None:
    """The record held since its machine went quiet, if the machine is unreachable and the
    workload waits whatever happens; None when nothing changes."""
    w = record.workload
    if health.state is not Health.UNREACHABLE or w.state is WorkloadState.HELD:
        return None
    if not holds_gpu(w.state):
        return None
    decision = wait_without_moving(w)
    if decision is None or decision.held_reason is None or health.since is None:
        return None
    held: Workload = evolve(
        w, state=WorkloadState.HELD, since=health.since, held_reason=decision.held_reason
    )
    return evolve(record, workload=held)


def resumed_on_return(
    record: WorkloadRecord, health: MachineHealth, now: datetime
) -> WorkloadRecord | None:
    """The record starting again, if it was held and its machine answers again."""
    w = record.workload
    if w.state is not WorkloadState.HELD or health.state is Health.UNREACHABLE:
        return None
    if answering(w, health).action is not RecoveryAction.RESUME:
        return None
    return with_state(record, WorkloadState.STARTING, now)


def health_change(
    record: WorkloadRecord, health: MachineHealth, now: datetime
) -> WorkloadRecord | None:
    """The record held or resumed, if its machine's health calls for it."""
    return held_while_away(record, health) or resumed_on_return(record, health, now)
