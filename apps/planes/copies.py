"""Copies on the fleet: the model a person names, and the views ``nodeau models copies`` prints.

Why it is so: docs/adr/decisions/apps-planes.md (copies.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from nodeau.apps.models import UnknownModel
from nodeau.apps.planes.plane import CopyListing, CopyView
from nodeau.domain.catalog import Catalog
from nodeau.domain.copies import CopyRequest, CopyStatus, MachineCopies, copy_statuses
from nodeau.domain.resolution import (
    SHORT_ID,
    Known,
    Resolution,
    Unresolved,
    display_name,
    resolve_name,
)
from nodeau.ports.cluster import MachineReport


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
