"""Qualification: what an imported model has proved it can do, per artifact.

Why it is so: docs/adr/decisions/domain.md (qualification.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType

from attrs import field, frozen

from nodeau.domain.aliases import AliasBook
from nodeau.domain.artifacts import ArtifactId
from nodeau.domain.memory import MeasuredKey, Measurement
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.tasks import Task


class Capability(enum.StrEnum):
    """One thing a model may or may not be able to do; qualification probes each alone."""

    CHAT = "chat"
    EMBED = "embed"
    RERANK = "rerank"
    TOOLS = "tools"
    STRUCTURED_OUTPUT = "structured-output"
    VISION_INPUT = "vision-input"


class ProbeOutcome(enum.StrEnum):
    """How one probe ended: passed, failed, or not applicable to this kind of model."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not applicable"


@frozen(kw_only=True)
class ProbeResult:
    """The outcome of one probe designed to fail if the model lacks the capability, with its
    evidence: what was asked, what came back, and why that passed or failed."""

    capability: Capability
    outcome: ProbeOutcome
    asked: str
    answered: str
    why: str

    @property
    def passed(self) -> bool:
        return self.outcome is ProbeOutcome.PASSED


def _unique_capabilities(probes: tuple[ProbeResult, ...]) -> tuple[ProbeResult, ...]:
    seen = [p.capability for p in probes]
    if len(seen) != len(set(seen)):
        raise ValueError(f"qualification evidence probes a capability twice: {seen}")
    return tuple(probes)


class MemorySource(enum.StrEnum):
    """How a qualification run's memory was read. Only a card's own reading (NVML, per
    process) is a measurement of that card; a runtime's report of its buffers on simulated
    hardware is kept as evidence and never recorded as any card's VRAM."""

    NVML = "nvml"
    RUNTIME_BUFFERS = "runtime's reported buffers (simulated hardware)"


@frozen(kw_only=True)
class MemoryReading:
    """The peak memory of one server a qualification started, in the configuration it ran."""

    task: Task
    config_key: str
    peak_bytes: int
    source: MemorySource

    def __attrs_post_init__(self) -> None:
        if self.peak_bytes <= 0:
            raise ValueError(f"a peak must be positive, got {self.peak_bytes}")


@frozen(kw_only=True)
class QualificationEvidence:
    """One qualification run of one artifact: on which card model and runtime, when, the
    memory it really took, and each probe's result with its evidence."""

    artifact_id: ArtifactId
    gpu_model: str
    runtime: str  # the model server and its version, as it names itself
    at: datetime
    context_tokens: int
    memory: tuple[MemoryReading, ...]
    probes: tuple[ProbeResult, ...] = field(converter=_unique_capabilities)
    seed: int | None = None  # the probes' content was drawn from it: the run can be repeated

    def __attrs_post_init__(self) -> None:
        if not self.gpu_model.strip():
            raise ValueError("qualification evidence names the GPU model it ran on")
        if not self.runtime.strip():
            raise ValueError("qualification evidence names the runtime it ran on")

    def result(self, capability: Capability) -> ProbeResult | None:
        """This run's result for one capability; None when it was not probed."""
        return next((p for p in self.probes if p.capability is capability), None)


def claimed_capabilities(evidence: QualificationEvidence | None) -> frozenset[Capability]:
    """The capabilities whose probe passed; no evidence claims nothing."""
    if evidence is None:
        return frozenset()
    return frozenset(p.capability for p in evidence.probes if p.passed)


def _runs(
    value: Mapping[ArtifactId, tuple[QualificationEvidence, ...]],
) -> Mapping[ArtifactId, tuple[QualificationEvidence, ...]]:
    return MappingProxyType({key: tuple(runs) for key, runs in value.items()})


@frozen(kw_only=True)
class EvidenceBook:
    """Qualification evidence keyed by artifact id, every run kept, oldest first."""

    runs: Mapping[ArtifactId, tuple[QualificationEvidence, ...]] = field(
        factory=dict, converter=_runs
    )

    def __attrs_post_init__(self) -> None:
        for artifact_id, runs in self.runs.items():
            if not runs:
                raise ValueError(f"artifact {artifact_id.hex} has an empty evidence list")
            if any(e.artifact_id != artifact_id for e in runs):
                raise ValueError(f"evidence of another artifact is filed under {artifact_id.hex}")

    @classmethod
    def empty(cls) -> EvidenceBook:
        """A book with no evidence."""
        return cls()

    def history(self, artifact_id: ArtifactId) -> tuple[QualificationEvidence, ...]:
        """Every run recorded for this artifact, oldest first."""
        return self.runs.get(artifact_id, ())

    def for_artifact(self, artifact_id: ArtifactId) -> QualificationEvidence | None:
        """The newest evidence of this artifact, or None if it was never qualified."""
        runs = self.history(artifact_id)
        return runs[-1] if runs else None

    def for_alias(self, aliases: AliasBook, alias: str) -> QualificationEvidence | None:
        """The newest evidence of the artifact the alias names now; never an earlier artifact's."""
        current = aliases.resolve(alias)
        return None if current is None else self.for_artifact(current)


def record(book: EvidenceBook, evidence: QualificationEvidence) -> EvidenceBook:
    """The book with this run appended to its own artifact's evidence (and nowhere else)."""
    runs = {**book.runs, evidence.artifact_id: (*book.history(evidence.artifact_id), evidence)}
    return EvidenceBook(runs=runs)


_TASK_CAPABILITY = {
    Task.CHAT: Capability.CHAT,
    Task.EMBED: Capability.EMBED,
    Task.RERANK: Capability.RERANK,
}
CODE_NOT_PROVED = ReasonCode.TASK_NOT_PROVED


def capability_of(task: Task) -> Capability:
    """The capability a task needs: chat, embed or rerank."""
    return _TASK_CAPABILITY[task]


def task_refusal(
    *,
    catalog: frozenset[Capability] | None,
    evidence: QualificationEvidence | None,
    task: Task,
    model: str,
) -> Refusal | None:
    """Why a model may not be run for ``task``, or None. A model claims a capability when
    the catalog entry that lists its bytes claims it (``catalog``: what we checked; None
    when no entry lists them, an imported model) or when its newest qualification proved
    it; nothing else counts, however the bytes arrived."""
    capability = capability_of(task)
    if capability in (catalog or frozenset()) | claimed_capabilities(evidence):
        return None
    if evidence is None:
        what = "it was never qualified"
    else:
        probe = evidence.result(capability)
        if probe is None:
            what = f"qualification did not probe {capability.value}"
        elif probe.outcome is ProbeOutcome.NOT_APPLICABLE:
            what = f"{capability.value} does not apply to it: {probe.why}"
        else:
            what = f"its {capability.value} probe failed on {evidence.at:%Y-%m-%d %H:%M}"
    if catalog is not None:
        listed = ", ".join(c.value for c in Capability if c in catalog) or "nothing"
        what = f"its catalog entry claims {listed}; {what}"
    return Refusal.of(
        CODE_NOT_PROVED,
        f"{model} has not proved it can {task.value} ({what}); "
        f"run nodeau model qualify {model}, or pass --unproved to serve it anyway",
    )


# Encoders (no causal attention) cannot generate: chat and what builds on chat do not
# apply to them. Every other model is probed for everything, and fails what it cannot do.
ENCODER_ARCHITECTURES = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "modern-bert",
        "neo-bert",
        "t5encoder",
    }
)
_GENERATIVE = (
    Capability.CHAT,
    Capability.TOOLS,
    Capability.STRUCTURED_OUTPUT,
    Capability.VISION_INPUT,
)


@frozen(kw_only=True)
class QualificationPlan:
    """Which servers a qualification starts (one per task), and what does not apply."""

    tasks: tuple[Task, ...]
    not_applicable: tuple[ProbeResult, ...]


def qualification_plan(architecture: str) -> QualificationPlan:
    """Every task's server for a generative model; embed and rerank for an encoder, whose
    generative capabilities are not applicable (and say why)."""
    if architecture not in ENCODER_ARCHITECTURES:
        return QualificationPlan(tasks=(Task.CHAT, Task.EMBED, Task.RERANK), not_applicable=())
    why = f"{architecture} is an encoder: it embeds text and cannot generate any"
    return QualificationPlan(
        tasks=(Task.EMBED, Task.RERANK),
        not_applicable=tuple(
            ProbeResult(
                capability=c, outcome=ProbeOutcome.NOT_APPLICABLE, asked="", answered="", why=why
            )
            for c in _GENERATIVE
        ),
    )


def card_measurements(evidence: QualificationEvidence, note: str) -> tuple[Measurement, ...]:
    """The measurements a run gives admission: only what NVML read on a card."""
    return tuple(
        Measurement(
            key=MeasuredKey(
                artifact_id=evidence.artifact_id.hex,
                gpu_model=evidence.gpu_model,
                config_key=m.config_key,
            ),
            peak_bytes=m.peak_bytes,
            note=note,
        )
        for m in evidence.memory
        if m.source is MemorySource.NVML
    )


@frozen(kw_only=True)
class CapabilityState:
    """What ``nodeau model info`` says of one capability: its state and where that comes from."""

    capability: Capability
    state: str  # passed, failed, not applicable, catalog, not probed, never qualified
    evidence: str


def capability_states(
    evidence: QualificationEvidence | None, catalog: frozenset[Capability] | None
) -> tuple[CapabilityState, ...]:
    """Each capability's state: what the newest qualification found when it probed it,
    else whether the catalog entry listing these bytes claims it (``catalog``; None when
    no entry lists them), else that nothing says (not probed, or never qualified)."""
    states = []
    for c in Capability:
        claimed = catalog is not None and c in catalog
        by_catalog = "; the catalog entry claims it" if claimed else ""
        probe = evidence.result(c) if evidence is not None else None
        if probe is not None:
            state = CapabilityState(
                capability=c, state=probe.outcome.value, evidence=probe.why + by_catalog
            )
        elif claimed:
            state = CapabilityState(
                capability=c, state="catalog", evidence="checked for the catalog entry"
            )
        elif evidence is not None:
            state = CapabilityState(capability=c, state="not probed", evidence="")
        else:
            state = CapabilityState(
                capability=c, state="never qualified", evidence="nodeau model qualify proves it"
            )
        states.append(state)
    return tuple(states)


def qualified_line(evidence: QualificationEvidence) -> str:
    """When, on what and by which runtime the newest qualification ran."""
    return (
        f"{evidence.at:%Y-%m-%d %H:%M %Z} on {evidence.gpu_model}, {evidence.runtime}, "
        f"context {evidence.context_tokens}, seed {evidence.seed}"
    )
