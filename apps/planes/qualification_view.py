"""A qualification run as ``nodeau model qualify`` shows it, the same on both planes."""

from __future__ import annotations

from nodeau.apps.planes.plane import MemoryView, ProbeView, QualificationView
from nodeau.domain.qualification import (
    Capability,
    MemorySource,
    QualificationEvidence,
    claimed_capabilities,
)


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
