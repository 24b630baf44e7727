"""Machine health in the fleet: assessed every resync from the two signals, and shown.

Each Node's two signals (the kubelet's node Lease, Nodeau's agent Lease) and
the last assessment go through the domain's ``assess``; the result is kept in
ConfigMap nodeau-health so "since" survives a restart. Decisions recorded here:

* A workload on an unreachable machine that waits whatever happens (a batch
  job, or a service whose recovery is ``never``) is recorded ``held`` with the
  domain's reason, since the moment the machine became unreachable, so
  ``nodeau ps`` prints the domain's held sentence. Nothing is stopped, moved
  or restarted.
* A service set to recover automatically is recovery's (``recover.py``).
* A held workload whose machine answers again (the domain's ``resume``) goes
  back to starting; its Pod, still there, brings it back to serving.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import partial

from attrs import evolve

from nodeau.domain.health import Health, HealthPolicy, MachineHealth, Signals, assess
from nodeau.domain.lifecycle import with_state
from nodeau.domain.recovery import RecoveryAction, answering, wait_without_moving
from nodeau.domain.workloads import Workload, WorkloadState, holds_gpu
from nodeau.ports.state import StateStore, WorkloadRecord


def assess_fleet(
    signals: Mapping[str, Signals],
    previous: Mapping[str, MachineHealth],
    now: datetime,
    policy: HealthPolicy | None = None,
    *,
    watching_since: datetime | None = None,
) -> dict[str, MachineHealth]:
    """Every Node's health now, each from its signals and its last assessment."""
    return {
        m: assess(s, now, policy, previous.get(m), watching_since)
        for m, s in sorted(signals.items())
    }


def changes(
    before: Mapping[str, MachineHealth], after: Mapping[str, MachineHealth]
) -> tuple[str, ...]:
    """One line per machine whose health state changed (or appeared), for the log."""
    return tuple(
        f"machine {m}: {h.sentence}"
        for m, h in sorted(after.items())
        if m not in before or before[m].state is not h.state
    )


def held_record(record: WorkloadRecord, health: MachineHealth) -> WorkloadRecord | None:
    """The record held, if its machine is unreachable and it waits whatever happens."""
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


def resumed_record(
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
    return held_record(record, health) or resumed_record(record, health, now)


def _changed_or_same(
    record: WorkloadRecord, *, health: MachineHealth, now: datetime
) -> WorkloadRecord:
    return health_change(record, health, now) or record


def show_health(
    store: StateStore,
    health: Mapping[str, MachineHealth],
    now: datetime,
    log: Callable[[str], None],
    records: Iterable[WorkloadRecord],
) -> None:
    """Hold or resume the workloads whose machine's health calls for it."""
    for record in records:
        h = health.get(record.workload.machine)
        if h is None:
            continue
        if health_change(record, h, now) is None:
            continue
        name = record.workload.name
        changed = store.update(name, partial(_changed_or_same, health=h, now=now))
        log(f"{name}: {changed.workload.state.value} ({h.sentence})")
