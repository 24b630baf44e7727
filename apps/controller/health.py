"""Machine health in the fleet, carried out: each workload whose machine's health calls for
it is held or resumed in the store (the rules: ``domain.holding``; the assessment:
``domain.health.assess_fleet``, kept in ConfigMap nodeau-health so "since" survives a
restart). A service set to recover automatically is recovery's (``recover.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import partial

from nodeau.domain.health import MachineHealth
from nodeau.domain.holding import health_change
from nodeau.ports.state import StateStore, WorkloadRecord


def _changed_or_same(
    record: WorkloadRecord, *, health: MachineHealth, now: datetime
) -> WorkloadRecord:
    return health_change(record, health, now) or record


def apply_health(
    store: StateStore,
    health: Mapping[str, MachineHealth],
    now: datetime,
    log: Callable[[str], None],
    records: Iterable[WorkloadRecord],
) -> None:
    """Hold or resume in ``store`` the workloads whose machine's health calls for it, and
    say each change in the log."""
    for record in records:
        h = health.get(record.workload.machine)
        if h is None:
            continue
        if health_change(record, h, now) is None:
            continue
        name = record.workload.name
        changed = store.update(name, partial(_changed_or_same, health=h, now=now))
        log(f"{name}: {changed.workload.state.value} ({h.sentence})")
