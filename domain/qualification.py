"""Qualification: what an imported model has proved it can do, per artifact.

Importing is not qualifying, and loading is not qualified: a model claims a
capability only after a probe for it passed, and each capability stands alone
(chat passed and tools failed claims chat and nothing else). Evidence belongs
to an artifact, never to an alias: looked up through an alias, it is the
evidence of the artifact the alias names now, never of an earlier one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from attrs import field, frozen

from nodeau.domain.aliases import AliasBook
from nodeau.domain.artifacts import ArtifactId


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


@frozen(kw_only=True)
class QualificationEvidence:
    """One qualification run of one artifact on one GPU model: measured peak and probe results."""

    artifact_id: ArtifactId
    gpu_model: str
    measured_peak_bytes: int | None
    probes: tuple[ProbeResult, ...] = field(converter=_unique_capabilities)

    def __attrs_post_init__(self) -> None:
        if not self.gpu_model.strip():
            raise ValueError("qualification evidence names the GPU model it ran on")
        if self.measured_peak_bytes is not None and self.measured_peak_bytes <= 0:
            raise ValueError(f"a measured peak must be positive, got {self.measured_peak_bytes}")


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
