"""What ``nodeau model qualify|info`` shows: the views and ``QualificationCommands``.

A qualification starts the model by the normal admission, measures its memory, probes each
capability and keeps the evidence under its artifact; ``info`` reads the newest evidence.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from attrs import frozen

from nodeau.apps.serving.commands import Refused
from nodeau.domain.qualification import (
    Capability,
    MemorySource,
    QualificationEvidence,
    claimed_capabilities,
)
from nodeau.ports.errors import NodeauError

if TYPE_CHECKING:
    from nodeau.apps.qualification.info_view import ModelInfoView


@frozen(kw_only=True)
class ProbeView:
    """One capability's result in a qualification, with its evidence."""

    capability: str
    outcome: str  # "passed", "failed" or "not applicable"
    asked: str
    answered: str
    why: str


@frozen(kw_only=True)
class MemoryView:
    """The peak memory one server of a qualification took, and how it was read."""

    task: str
    config: str
    peak_bytes: int
    source: str  # "nvml", or the runtime's reported buffers on simulated hardware
    measured: bool  # recorded as a measurement admission uses (a card's own reading)


@frozen(kw_only=True)
class QualificationView:
    """``nodeau model qualify``: one run, what each capability did, what the model claims."""

    model: str
    artifact: str  # SHA-256 hex
    card: str
    runtime: str
    at: datetime
    context_tokens: int
    memory: tuple[MemoryView, ...]
    probes: tuple[ProbeView, ...]
    claims: tuple[str, ...]  # the capabilities that passed
    seed: int | None  # what the probes' content was drawn from (--seed repeats the run)


class QualificationUnavailable(NodeauError):
    """This connection to the plane cannot keep qualification evidence."""


class QualificationCommands(Protocol):
    """``nodeau model qualify`` and ``nodeau model info`` on one plane."""

    def qualify(
        self, model: str, context_tokens: int | None, seed: int | None = None
    ) -> QualificationView | Refused:
        """Start the model by the normal admission, watch its memory, probe each
        capability, stop what was started, and keep the evidence under its artifact."""
        ...

    def info(self, model: str) -> ModelInfoView:
        """What ``model`` (a name this plane knows, an artifact id or prefix) declares, its
        estimated peaks, the peaks measured on this plane's cards, and each capability's
        state from this plane's newest qualification of its artifact (never an alias's
        earlier one) and the catalog."""
        ...


def qualification_view(model: str, evidence: QualificationEvidence) -> QualificationView:
    """What a person reads of one qualification run."""
    claimed = claimed_capabilities(evidence)
    return QualificationView(
        model=model,
        artifact=evidence.artifact_id.hex,
        card=evidence.gpu_model,
        runtime=evidence.runtime,
        at=evidence.at,
        context_tokens=evidence.context_tokens,
        memory=tuple(
            MemoryView(
                task=m.task.value,
                config=m.config_key,
                peak_bytes=m.peak_bytes,
                source=m.source.value,
                measured=m.source is MemorySource.NVML,
            )
            for m in evidence.memory
        ),
        probes=tuple(
            ProbeView(
                capability=p.capability.value,
                outcome=p.outcome.value,
                asked=p.asked,
                answered=p.answered,
                why=p.why,
            )
            for p in evidence.probes
        ),
        claims=tuple(c.value for c in Capability if c in claimed),
        seed=evidence.seed,
    )
