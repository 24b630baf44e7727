"""What the machines of a fleet report and how people marked them: the controller's inputs.

An agent publishes a ``MachineReport`` (its cards, its verified models, its server); the
marks a person put on machines make a ``MarkedFleet``. Both are plain values the ports carry.
"""

from __future__ import annotations

from datetime import datetime

from attrs import field, frozen

from nodeau.domain.artifacts import is_sha256_hex
from nodeau.domain.copies import CopyProgress
from nodeau.domain.hardware import AgentReport, MachineReading, PodMemory
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.model_server import ServerAbilities
from nodeau.domain.placement import SchedulingSettings


def _sha256_hex(_instance: object, _attribute: object, value: str) -> None:
    if not is_sha256_hex(value):
        raise ValueError(f"an artifact id is 64 lowercase hex digits, got {value!r}")


def _aware(_instance: object, _attribute: object, value: datetime) -> None:
    if value.utcoffset() is None:
        raise ValueError(f"a report's moment must carry a timezone, got {value.isoformat()}")


@frozen(kw_only=True)
class MachineArtifact:
    """One artifact verified on the reporting machine, and where its file is there."""

    id: str = field(validator=_sha256_hex)  # SHA-256 hex
    names: tuple[str, ...]  # aliases and catalog names it is known by on that machine
    size_bytes: int
    path: str  # the verified file (the first one of a split artifact)
    summary: ModelSummary


@frozen(kw_only=True)
class MachineReport:
    """What one machine's agent published at one moment: its cards and its verified models."""

    reading: MachineReading
    at: datetime = field(validator=_aware)
    artifacts: tuple[MachineArtifact, ...] = ()
    copies: tuple[CopyProgress, ...] = ()  # its progress on each copy asked of it
    # what each Pod's processes hold on each card, now and at their peak (NVML, per
    # process); none on simulated cards or from an agent that reads no card
    pods: tuple[PodMemory, ...] = ()
    # what the machine's model server (its image, asked on the machine) says it can use;
    # None: not asked (an agent without its answer, or a report written before it)
    server: ServerAbilities | None = None

    @property
    def machine(self) -> str:
        return self.reading.machine

    def as_agent_report(self, *, control_plane: bool = False) -> AgentReport:
        """The domain's agent report (the cards only) this report makes."""
        return self.reading.as_report(self.at, control_plane=control_plane)


@frozen(kw_only=True)
class MarkedFleet:
    """Every machine, the marks a person put on them, and the scheduling settings they make."""

    nodes: tuple[str, ...]
    drained: frozenset[str]
    upgrading: frozenset[str]
    control_plane: frozenset[str]
    settings: SchedulingSettings
