"""Qualification evidence as the registry keeps it, built for tests.

``qualified`` gives the evidence of one artifact on one GPU model: its chat probe's
outcome as given, its memory read from the runtime's buffers, at a fixed time.
"""

from __future__ import annotations

from datetime import UTC, datetime

from nodeau.domain.artifacts import Sha256
from nodeau.domain.qualification import (
    Capability,
    MemoryReading,
    MemorySource,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
)
from nodeau.domain.tasks import Task


def qualified(artifact_id: Sha256, gpu: str, chat: ProbeOutcome) -> QualificationEvidence:
    return QualificationEvidence(
        artifact_id=artifact_id,
        gpu_model=gpu,
        runtime="llama-server 0.5.0-dev (build 1, commit 0c1e570)",
        at=datetime(2026, 11, 30, 18, 5, tzinfo=UTC),
        context_tokens=2048,
        memory=(
            MemoryReading(
                task=Task.CHAT,
                config_key="task=chat,ctx=2048",
                peak_bytes=123_456_789,
                source=MemorySource.RUNTIME_BUFFERS,
            ),
        ),
        probes=(
            ProbeResult(
                capability=Capability.CHAT,
                outcome=chat,
                asked='chat: "Reply with the code word QZ7K."',
                answered="QZ7K",
                why="the reply holds the code word",
            ),
        ),
    )
