"""``RecoveryCommands`` on one machine: the choice is kept in the workload's record.

A machine alone has nowhere to move a service to, so an automatic choice is kept (it
applies once the machine joins a fleet) and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Protocol

from attrs import evolve, frozen

from nodeau.apps.recovery.commands import RecoveryListing, recovery_view, refuse_batch
from nodeau.domain.records import Event, WorkloadRecord
from nodeau.domain.recovery import with_recovery
from nodeau.domain.recovery_choice import recovery_change
from nodeau.domain.workloads import RecoveryMode, Workload, WorkloadKind, holds_gpu
from nodeau.ports.state import StateStore, UnknownWorkload

NOWHERE = "this machine is the only one: recovery has nowhere to move it"


class StateParts(Protocol):
    """The store these commands write, built when first asked for."""

    @property
    def state(self) -> StateStore: ...


def machine_listing(
    plane: str, machine: str, records: Iterable[WorkloadRecord], now: datetime
) -> RecoveryListing:
    """Every service holding a card here; an automatic one says it has nowhere to go."""
    services = [
        r.workload
        for r in records
        if r.workload.kind is WorkloadKind.SERVICE and holds_gpu(r.workload.state)
    ]
    return RecoveryListing(
        plane=plane,
        control_plane=f"{machine} is the only machine on this plane, and so the one that decides",
        services=tuple(
            recovery_view(
                w.name,
                machine=w.machine,
                state=w.state.value,
                choice=(w.recovery_mode, w.recovery_after),
                copies=None,
                workload=w,
                now=now,
                note=NOWHERE if w.recovery_mode is RecoveryMode.AUTOMATIC else None,
            )
            for w in services
        ),
    )


def held_service(name: str, records: Iterable[WorkloadRecord]) -> Workload:
    """The workload called ``name`` holding a card here; UnknownWorkload when none is."""
    for r in records:
        if r.workload.name == name and holds_gpu(r.workload.state):
            return r.workload
    raise UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")


def set_in_store(
    state: StateStore, w: Workload, mode: RecoveryMode, after: timedelta, now: datetime
) -> str:
    """Record the choice in the workload's record (and an event); the domain's sentence."""
    refuse_batch(w.name, w.kind)
    change = recovery_change(w.name, w.kind, (w.recovery_mode, w.recovery_after), (mode, after))
    if change.changed:
        state.update(w.name, lambda r: evolve(r, workload=with_recovery(r.workload, mode, after)))
        text = f"recovery {change.now}; nothing restarts"
        state.record_event(Event(at=now, workload=w.name, text=text))
    return change.sentence


@frozen(kw_only=True)
class ThisMachineRecovery:
    """``RecoveryCommands`` where the plane is this machine, called ``machine``."""

    _plane: str
    _machine: str
    _parts: StateParts
    _records: Callable[[], tuple[WorkloadRecord, ...]]
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def set_choice(self, name: str, mode: RecoveryMode, after: timedelta) -> str:
        self._permit("set-recovery")
        w = held_service(name, self._records())
        return set_in_store(self._parts.state, w, mode, after, self._clock())

    def status(self) -> RecoveryListing:
        return machine_listing(self._plane, self._machine, self._records(), self._clock())
