"""``RecoveryCommands`` on a fleet: the choice is in the object's spec, the controller acts.

A choice is written to the GPUService and recorded by the controller on its next pass; a
listing shows every GPUService, decided or not, with the machines holding a verified copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from attrs import frozen

from nodeau.apps.planes.fleet_workloads import find_workload, workload_view
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.recovery.commands import RecoveryListing, recovery_view, refuse_batch
from nodeau.domain.fleet_reports import MachineReport
from nodeau.domain.recovery_choice import recovery_change
from nodeau.domain.workloads import RecoveryMode, Workload, WorkloadKind
from nodeau.ports.cluster import FleetMarks, MachineReports
from nodeau.ports.workload_objects import WorkloadObject, WorkloadObjects

DEFAULT_CHOICE = (RecoveryMode.NEVER, timedelta(minutes=3))


def control_plane_line(marked: frozenset[str], label: str) -> str:
    """How the machine that decides is known on the fleet: its Node's ``label``."""
    if not marked:
        return (
            f"no machine is marked control plane (no node carries label {label}), "
            "so no workload waits for the machine that decides"
        )
    if len(marked) == 1:
        return f"the control-plane machine is {min(marked)} (its node carries label {label})"
    names = ", ".join(sorted(marked))
    return f"the control-plane machines are {names} (their nodes carry label {label})"


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
    control_plane: frozenset[str],
    label: str,
    services: Iterable[tuple[WorkloadObject, WorkloadView]],
    reports: Iterable[MachineReport],
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
    return RecoveryListing(
        plane=plane, control_plane=control_plane_line(control_plane, label), services=tuple(rows)
    )


@frozen(kw_only=True)
class FleetRecovery:
    """``RecoveryCommands`` where the plane is a fleet, described as ``plane``; the machines
    that decide carry ``control_plane_label``."""

    _plane: str
    _objects: WorkloadObjects
    _marks: FleetMarks
    _reports: MachineReports
    _control_plane_label: str
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def set_choice(self, name: str, mode: RecoveryMode, after: timedelta) -> str:
        self._permit("set-recovery")
        obj = find_workload(self._objects, name)
        refuse_batch(name, obj.kind)
        change = recovery_change(name, obj.kind, choice_of(obj), (mode, after))
        if not change.changed:
            return change.sentence
        self._objects.set_recovery(obj.kind, name, mode, after)
        return f"{change.sentence} (the controller records it on its next pass)"

    def status(self) -> RecoveryListing:
        now = self._clock()
        services = [
            (o, workload_view(o, now))
            for o in self._objects.list_all()
            if o.kind is WorkloadKind.SERVICE
        ]
        return fleet_listing(
            self._plane,
            self._marks.read().control_plane,
            self._control_plane_label,
            services,
            self._reports.read().reports,
            now,
        )
