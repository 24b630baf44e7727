"""``CopyCommands`` on a fleet: copy requests in the cluster, states from the agents' reports.

The model a person names is resolved by the domain's one rule among what the machines hold
verified, the catalog and the requests already made; the agent of the machine fetches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from attrs import frozen

from nodeau.apps.copies.commands import CopyAsked, CopyListing, CopyView
from nodeau.apps.models.actions import UnknownModel
from nodeau.domain.catalog import Catalog
from nodeau.domain.copies import (
    PERSON,
    CopyRequest,
    CopyStatus,
    MachineCopies,
    asked_sentence,
    copy_status,
    copy_statuses,
    find_request,
    withdrawal,
)
from nodeau.domain.fleet_reports import MachineReport
from nodeau.domain.resolution import (
    SHORT_ID,
    Known,
    Resolution,
    Unresolved,
    display_name,
    resolve_name,
)
from nodeau.ports.cluster import FleetMarks, MachineReports, ModelCopies, UnknownMachine


@frozen(kw_only=True)
class Target:
    """The artifact a typed model names for a copy, and how a sentence names it."""

    artifact: str
    name: str
    fetchable: bool  # the command's catalog lists it (the agent decides with its own)

    @property
    def short_id(self) -> str:
        return self.artifact[:SHORT_ID]


def resolve_target(
    text: str,
    reports: Iterable[MachineReport],
    catalog: Catalog,
    requests: Iterable[CopyRequest],
) -> Target:
    """The one artifact ``text`` names on the fleet; UnknownModel saying why when none."""
    catalogued = {e.entry.artifact().id.hex: e.name for e in catalog.entries}
    known = [
        *(
            Known(artifact_id=a.id.lower(), names=a.names, where=rep.machine)
            for rep in reports
            for a in rep.artifacts
        ),
        *(Known(artifact_id=i, names=(name,)) for i, name in catalogued.items()),
        *(Known(artifact_id=r.artifact, names=(r.name,)) for r in requests),
    ]
    match resolve_name(text, known):
        case Resolution() as found:
            return Target(
                artifact=found.artifact_id,
                name=display_name(text, found.names, found.artifact_id),
                fetchable=found.artifact_id in catalogued,
            )
        case Unresolved() as missed:
            raise UnknownModel(
                f"{missed.sentence} on the fleet (what its machines hold verified, "
                "the catalog, the copies asked for)"
            )
    raise AssertionError("resolve_name answers a Resolution or an Unresolved")


def machine_copies(report: MachineReport) -> MachineCopies:
    """What a machine's report says of its copies, as the domain reads it."""
    return MachineCopies(
        machine=report.machine,
        at=report.at,
        verified={a.id.lower(): a.names for a in report.artifacts},
        progress=report.copies,
    )


def copy_view(status: CopyStatus) -> CopyView:
    """A copy as the command prints it."""
    return CopyView(
        machine=status.machine,
        model=status.name,
        artifact=status.artifact,
        state=status.state.value,
        sentence=status.sentence,
        bytes_done=status.bytes_done,
        bytes_total=status.bytes_total,
        asked_by=status.askers,
        requested_at=status.requested_at,
        reported_at=status.reported_at,
    )


def copy_listing(
    plane: str, requests: Iterable[CopyRequest], reports: Iterable[MachineReport]
) -> CopyListing:
    """Every copy on the fleet, in its state."""
    statuses = copy_statuses(requests, (machine_copies(r) for r in reports))
    return CopyListing(plane=plane, copies=tuple(copy_view(s) for s in statuses))


@frozen(kw_only=True)
class FleetCopies:
    """``CopyCommands`` where the plane is a fleet, described as ``plane``."""

    _plane: str
    _requests: Callable[[], ModelCopies]  # the port; raises when this connection has none
    _marks: FleetMarks
    _reports: MachineReports
    _clock: Callable[[], datetime]

    def request(self, model: str, machine: str, catalog: Catalog) -> CopyAsked:
        port = self._requests()
        if machine not in self._marks.read().nodes:
            raise UnknownMachine.named(machine)
        reports = self._reports.read().reports
        requests = port.requests()
        target = resolve_target(model, reports, catalog, requests)
        before = find_request(requests, machine, target.artifact)
        request = port.request(machine, target.artifact, target.name, PERSON, self._clock())
        report = next((r for r in reports if r.machine == machine), None)
        status = copy_status(request, None if report is None else machine_copies(report))
        sentence = asked_sentence(
            status,
            already=before is not None and before.asked_by(PERSON),
            fetchable=target.fetchable,
            short_id=target.short_id,
        )
        return CopyAsked(copy=copy_view(status), sentence=sentence)

    def withdraw(self, model: str, machine: str, catalog: Catalog) -> str:
        port = self._requests()
        requests = port.requests()
        target = resolve_target(model, self._reports.read().reports, catalog, requests)
        decided = withdrawal(
            find_request(requests, machine, target.artifact),
            asker=PERSON,
            machine=machine,
            name=target.name,
        )
        if decided.changed:
            port.withdraw(machine, target.artifact, PERSON)
        return decided.sentence

    def listing(self) -> CopyListing:
        requests = self._requests().requests()
        return copy_listing(self._plane, requests, self._reports.read().reports)
