"""What a plane's machines and marks show and change: the views and ``MachineCommands``.

Every change is the domain's (``domain.scheduling``): it says what happens, and it moves or
restarts nothing; each plane only records the mark its own way.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from attrs import frozen

from nodeau.domain.hardware import GpuReading
from nodeau.domain.placement import Policy
from nodeau.domain.reservations import Ledger

OWN_POLICY = "its own override"
FLEET_POLICY = "the fleet policy"


@frozen(kw_only=True)
class GpuView:
    uuid: str
    model: str
    total_bytes: int
    held_by: str | None
    reserved_bytes: int


@frozen(kw_only=True)
class MachineView:
    """One machine as ``fleet list`` shows it."""

    machine: str
    health: str
    health_sentence: str | None
    drained: bool
    upgrading: bool
    control_plane: bool
    policy: str
    policy_from: str  # FLEET_POLICY or OWN_POLICY
    simulated: bool | None  # None: no report yet
    reported_at: datetime | None
    gpus: tuple[GpuView, ...]


@frozen(kw_only=True)
class FleetListing:
    """``nodeau fleet list``: the plane, its fleet-wide policy and every machine."""

    plane: str
    fleet_policy: str
    machines: tuple[MachineView, ...]


@frozen(kw_only=True)
class UpgradeMark:
    """``nodeau fleet upgrade``: the mark as it is now, and the domain's sentence."""

    plane: str
    machine: str
    upgrading: bool
    sentence: str


def gpu_views(gpus: Iterable[GpuReading], ledger: Ledger) -> tuple[GpuView, ...]:
    """Each card as reported, with the workload holding it and the bytes reserved on it."""
    return tuple(
        GpuView(
            uuid=r.gpu.uuid,
            model=r.gpu.model,
            total_bytes=r.gpu.total_bytes,
            held_by=None if (h := ledger.holder(r.gpu.uuid)) is None else h.workload,
            reserved_bytes=ledger.reserved_bytes(r.gpu.uuid),
        )
        for r in gpus
    )


class MachineCommands(Protocol):
    """``nodeau fleet list|drain|undrain|policy|upgrade`` on one plane."""

    def listing(self) -> FleetListing:
        """Every machine, its health, marks, policy and cards."""
        ...

    def drain(self, node: str) -> str:
        """Place nothing new there; nothing running is touched. The domain's sentence."""
        ...

    def undrain(self, node: str) -> str:
        """Take new placements there again; nothing moves back. The domain's sentence."""
        ...

    def set_policy(self, policy: Policy, node: str | None) -> str:
        """The fleet-wide policy, or one machine's override; new placements only."""
        ...

    def mark_upgrading(self, node: str, *, upgrading: bool) -> UpgradeMark:
        """Mark a machine upgrading (``upgrading``) or take the mark off: while it holds,
        nothing on the machine moves and nothing new is placed there (on one machine nothing
        moves anyway). Marking restarts and moves nothing."""
        ...
