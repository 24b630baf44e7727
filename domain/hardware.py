"""Hardware: machines and their GPUs, and merging what agents report.

Why it is so: docs/adr/decisions/domain.md (hardware.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from attrs import evolve, field, frozen

from nodeau.domain.checks import not_negative, positive


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
    # by name, made at the first lookup (a decision looks machines up once per card)
    _by_name: dict[str, Machine] | None = field(
        default=None, init=False, repr=False, eq=False, hash=False
    )

    def machine(self, name: str) -> Machine | None:
        index = self._by_name
        if index is None:
            index = {m.name: m for m in reversed(self.machines)}  # the first of a name wins
            object.__setattr__(self, "_by_name", index)
        return index.get(name)

    def locate(self, uuid: str) -> tuple[Machine, Gpu] | None:
        """The machine and card for a GPU UUID, if any machine has it."""
        for m in self.machines:
            g = m.gpu(uuid)
            if g is not None:
                return m, g
        return None

    @property
    def card_count(self) -> int:
        """How many cards the machines list."""
        return sum(len(m.gpus) for m in self.machines)

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

    @property
    def real_cards(self) -> tuple[Gpu, ...]:
        """The cards a model server here would be given: none where the hardware is simulated."""
        return () if self.simulated else tuple(r.gpu for r in self.gpus if not r.gpu.simulated)

    def as_report(self, at: datetime, *, control_plane: bool = False) -> AgentReport:
        """The agent report this reading makes."""
        return AgentReport(
            machine=self.machine,
            reported_at=at,
            # a simulated reading's cards are simulated, whatever each one says
            gpus=tuple(
                evolve(r.gpu, simulated=True) if self.simulated else r.gpu for r in self.gpus
            ),
            control_plane=control_plane,
        )


# -- a model server's own memory, per Pod and card (read by NVML on the agent's machine) --------


@frozen(kw_only=True)
class CardProcess:
    """One process NVML lists on a card, and the bytes it holds there now."""

    pid: int = field(validator=positive)
    gpu_uuid: str
    used_bytes: int = field(validator=not_negative)


@frozen(kw_only=True)
class PodMemory:
    """What one Pod's processes hold on one card: now, and the most any sample saw since the
    agent first saw the Pod there (its peak)."""

    pod_uid: str
    gpu_uuid: str
    used_bytes: int = field(validator=not_negative)
    peak_bytes: int = field(validator=not_negative)

    def __attrs_post_init__(self) -> None:
        if self.peak_bytes < self.used_bytes:
            raise ValueError(
                f"Pod {self.pod_uid} holds {self.used_bytes} bytes, more than its peak "
                f"{self.peak_bytes}"
            )


@frozen(kw_only=True)
class PodWatch:
    """What an agent keeps between samples: each Pod's memory per card, and the moment a
    sample last listed one of its processes there."""

    pods: tuple[tuple[PodMemory, datetime], ...] = ()

    def memory(self) -> tuple[PodMemory, ...]:
        """Each Pod's memory per card, by Pod UID then card UUID."""
        return tuple(m for m, _ in self.pods)


def after_sample(
    watch: PodWatch,
    sample: Iterable[tuple[str, CardProcess]],
    at: datetime,
    keep_for: timedelta,
) -> PodWatch:
    """The watch after one more sample: each process listed with the UID of the Pod it
    belongs to. A Pod's processes on one card add up (a server and its helpers); its peak
    is the most any sample saw; a Pod listed on a card by no sample for longer than
    ``keep_for`` is forgotten there, and until then it holds 0 now and keeps its peak (a
    model server restarting in its Pod does not lose what it took before)."""
    now: dict[tuple[str, str], int] = {}
    for pod, proc in sample:
        key = (pod, proc.gpu_uuid)
        now[key] = now.get(key, 0) + proc.used_bytes
    before = {(m.pod_uid, m.gpu_uuid): (m, seen) for m, seen in watch.pods}
    kept: dict[tuple[str, str], tuple[PodMemory, datetime]] = {
        key: (evolve(memory, used_bytes=0), seen)
        for key, (memory, seen) in before.items()
        if key not in now and at - seen <= keep_for
    }
    for (pod, gpu), used in now.items():
        peak = max(before[(pod, gpu)][0].peak_bytes if (pod, gpu) in before else 0, used)
        kept[(pod, gpu)] = (
            PodMemory(pod_uid=pod, gpu_uuid=gpu, used_bytes=used, peak_bytes=peak),
            at,
        )
    return PodWatch(pods=tuple(kept[k] for k in sorted(kept)))
