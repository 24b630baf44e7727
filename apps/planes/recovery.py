"""``nodeau recovery``: each service's recovery choice, its copies and its last recovery.

Why it is so: docs/adr/decisions/apps-planes.md (recovery.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from attrs import evolve

from nodeau.apps.planes.plane import LastRecoveryView, NotAService, RecoveryListing, RecoveryView
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.domain.records import Event, WorkloadRecord
from nodeau.domain.recovery import with_recovery
from nodeau.domain.recovery_choice import recovery_change
from nodeau.domain.workloads import (
    Recovery,
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
    holds_gpu,
    ps_sentence,
    recovery_words,
)
from nodeau.ports.cluster import MachineReport, WorkloadObject
from nodeau.ports.state import StateStore, UnknownWorkload

NOWHERE = "this machine is the only one: recovery has nowhere to move it"
DEFAULT_CHOICE = (RecoveryMode.NEVER, timedelta(minutes=3))
SHOWN_NOW = frozenset({WorkloadState.HELD, WorkloadState.RECOVERING})


def refuse_batch(name: str, kind: WorkloadKind) -> None:
    """``NotAService`` for a batch job."""
    if kind is not WorkloadKind.SERVICE:
        raise NotAService(f"recovery applies to served workloads; {name} is a batch job")


def last_recovery_view(move: Recovery | None) -> LastRecoveryView | None:
    if move is None:
        return None
    return LastRecoveryView(
        from_machine=move.from_machine,
        to_machine=move.to_machine,
        at=move.at,
        sentence=move.sentence,
    )


def recovery_view(
    name: str,
    *,
    machine: str | None,
    state: str,
    choice: tuple[RecoveryMode, timedelta],
    copies: tuple[str, ...] | None,
    workload: Workload | None,
    now: datetime,
    note: str | None,
) -> RecoveryView:
    """One service's row; its ``ps`` sentence only while it is held or recovering."""
    mode, after = choice
    shown = workload is not None and workload.state in SHOWN_NOW
    return RecoveryView(
        name=name,
        machine=machine,
        state=state,
        choice=recovery_words(mode, after),
        mode=mode.value,
        after_seconds=int(after.total_seconds()),
        copies=copies,
        last_recovery=None if workload is None else last_recovery_view(workload.last_recovery),
        sentence=ps_sentence(workload, now) if shown and workload is not None else None,
        note=note,
    )


# -- one machine


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


def held_service(name: str, record: WorkloadRecord | None) -> Workload:
    """The workload called ``name`` holding a card here; UnknownWorkload when none is."""
    if record is None or not holds_gpu(record.workload.state):
        raise UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
    return record.workload


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


# -- a fleet


def choice_of(obj: WorkloadObject) -> tuple[RecoveryMode, timedelta]:
    """What was asked in the spec; the record's when the spec does not read."""
    if obj.ask is not None:
        return obj.ask.recovery, obj.ask.recovery_after
    if obj.record is not None:
        w = obj.record.workload
        return w.recovery_mode, w.recovery_after
    return DEFAULT_CHOICE


def copies_of(artifact_id: str, verified: Mapping[str, frozenset[str]]) -> tuple[str, ...]:
    """The machines reporting a verified copy of the artifact, by name."""
    return tuple(sorted(m for m, ids in verified.items() if artifact_id in ids))


def waits_on_control_plane(
    w: Workload | None, mode: RecoveryMode, control_plane: frozenset[str]
) -> str | None:
    """An automatic service on the control-plane machine waits for it: the decision is
    made there."""
    if w is None or mode is not RecoveryMode.AUTOMATIC or w.machine not in control_plane:
        return None
    return (
        f"{w.machine} is the control-plane machine, which makes the decision: "
        f"{w.name} waits for it if it stops answering"
    )


def fleet_listing(
    plane: str,
    control_plane_line: str,
    services: Iterable[tuple[WorkloadObject, WorkloadView]],
    reports: Iterable[MachineReport],
    control_plane: frozenset[str],
    now: datetime,
) -> RecoveryListing:
    """Every GPUService (decided or not), with the copies the machines report."""
    verified = {r.machine: frozenset(a.id for a in r.artifacts) for r in reports}
    rows = []
    for obj, view in services:
        w = None if obj.record is None else obj.record.workload
        choice = choice_of(obj)
        rows.append(
            recovery_view(
                obj.name,
                machine=view.machine,
                state=view.state,
                choice=choice,
                copies=None if w is None else copies_of(w.artifact_id, verified),
                workload=w,
                now=now,
                note=waits_on_control_plane(w, choice[0], control_plane),
            )
        )
    return RecoveryListing(plane=plane, control_plane=control_plane_line, services=tuple(rows))
