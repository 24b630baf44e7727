"""Hardware: machines and their GPUs, and merging what agents report.

A GPU is identified by its UUID, never by an index (indices move). A card
moved to another machine keeps its UUID; the newest report that names a UUID
says where it is. Merging is a pure function of the set of reports, so the
order in which reports arrive never changes the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from attrs import field, frozen

from nodeau.domain.checks import positive


@frozen(kw_only=True)
class Gpu:
    """One physical card: its UUID, model name and total memory in bytes."""

    uuid: str
    model: str
    total_bytes: int = field(validator=positive)
    simulated: bool = False

    def __attrs_post_init__(self) -> None:
        if not self.uuid.strip():
            raise ValueError("a GPU needs a UUID")


@frozen(kw_only=True)
class Machine:
    """One computer running Nodeau (also a Kubernetes node on Linux)."""

    name: str
    gpus: tuple[Gpu, ...] = ()
    control_plane: bool = False

    def __attrs_post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a machine needs a name")
        uuids = [g.uuid for g in self.gpus]
        if len(uuids) != len(set(uuids)):
            raise ValueError(f"machine {self.name} lists a GPU UUID twice")

    def gpu(self, uuid: str) -> Gpu | None:
        """The card with this UUID on this machine, if it is here."""
        return next((g for g in self.gpus if g.uuid == uuid), None)


@frozen(kw_only=True)
class AgentReport:
    """What one machine's agent saw at one moment: the cards it has."""

    machine: str
    reported_at: datetime
    gpus: tuple[Gpu, ...] = ()
    control_plane: bool = False

    def __attrs_post_init__(self) -> None:
        uuids = [g.uuid for g in self.gpus]
        if len(uuids) != len(set(uuids)):
            raise ValueError(f"the report from {self.machine} lists a GPU UUID twice")


@frozen(kw_only=True)
class Fleet:
    """The machines Nodeau can place work on, as the newest reports describe them."""

    machines: tuple[Machine, ...] = ()

    def machine(self, name: str) -> Machine | None:
        return next((m for m in self.machines if m.name == name), None)

    def locate(self, uuid: str) -> tuple[Machine, Gpu] | None:
        """The machine and card for a GPU UUID, if any machine has it."""
        for m in self.machines:
            g = m.gpu(uuid)
            if g is not None:
                return m, g
        return None

    @property
    def gpus(self) -> tuple[tuple[Machine, Gpu], ...]:
        return tuple((m, g) for m in self.machines for g in m.gpus)


def latest_per_machine(reports: Iterable[AgentReport]) -> Mapping[str, AgentReport]:
    """Each machine's newest report; a tie between equal moments keeps the larger report."""
    latest: dict[str, AgentReport] = {}
    for r in reports:
        held = latest.get(r.machine)
        if held is None or _report_key(r) > _report_key(held):
            latest[r.machine] = r
    return latest


def _report_key(r: AgentReport) -> tuple[datetime, tuple[str, ...]]:
    # a total order on reports of one machine, so ties never depend on arrival order
    return (r.reported_at, tuple(sorted(g.uuid for g in r.gpus)))


def merge_reports(reports: Iterable[AgentReport]) -> Fleet:
    """The fleet that a set of agent reports describes.

    Each machine is described by its newest report. A UUID named by several
    machines' newest reports (a card moved) belongs to the machine whose report
    is newest; equal moments are broken by machine name so the result never
    depends on arrival order.
    """
    latest = latest_per_machine(reports)
    owner: dict[str, tuple[datetime, str]] = {}
    for r in latest.values():
        for g in r.gpus:
            claim = (r.reported_at, r.machine)
            if g.uuid not in owner or claim > owner[g.uuid]:
                owner[g.uuid] = claim
    machines = []
    for name in sorted(latest):
        r = latest[name]
        kept = tuple(sorted((g for g in r.gpus if owner[g.uuid][1] == name), key=lambda g: g.uuid))
        machines.append(Machine(name=name, gpus=kept, control_plane=r.control_plane))
    return Fleet(machines=tuple(machines))


@frozen(kw_only=True)
class GpuReading:
    """One card as read now: the card, its free memory (a reading, not the ledger) and driver."""

    gpu: Gpu
    free_bytes: int
    driver_version: str


@frozen(kw_only=True)
class MachineReading:
    """What this machine has, read-only: its cards, or why it has none."""

    machine: str
    gpus: tuple[GpuReading, ...]
    simulated: bool
    note: str

    def as_report(self, at: datetime, *, control_plane: bool = False) -> AgentReport:
        """The agent report this reading makes."""
        return AgentReport(
            machine=self.machine,
            reported_at=at,
            gpus=tuple(r.gpu for r in self.gpus),
            control_plane=control_plane,
        )
