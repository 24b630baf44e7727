"""What qualification says, word for word, where a state or a refusal has no probe behind it:
the catalog's claim, a model never qualified, an encoder's generative capabilities, and the
measurements a run gives admission."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodeau.domain.artifacts import Sha256
from nodeau.domain.memory import MeasuredKey, Measurement
from nodeau.domain.qualification import (
    Capability,
    CapabilityState,
    MemoryReading,
    MemorySource,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
    capability_states,
    card_measurements,
    qualification_plan,
    task_refusal,
)
from nodeau.domain.resolution import Known, Unresolved, resolve_name
from nodeau.domain.tasks import Task

AT = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
ARTIFACT = Sha256.of_bytes(b"bert")
C = Capability


def evidence(*probes: ProbeResult, memory: tuple[MemoryReading, ...] = ()) -> QualificationEvidence:
    return QualificationEvidence(
        artifact_id=ARTIFACT,
        gpu_model="RTX 4090",
        runtime="llama-server 0.5.0-dev",
        at=AT,
        context_tokens=512,
        memory=memory,
        probes=probes,
    )


def test_with_no_run_a_capability_is_the_catalogs_claim_or_never_qualified() -> None:
    states = capability_states(None, frozenset({C.CHAT, C.TOOLS}))
    claimed = ("catalog", "checked for the catalog entry")
    never = ("never qualified", "nodeau model qualify proves it")
    assert [(s.capability, s.state, s.evidence) for s in states] == [
        (C.CHAT, *claimed),
        (C.EMBED, *never),
        (C.RERANK, *never),
        (C.TOOLS, *claimed),
        (C.STRUCTURED_OUTPUT, *never),
        (C.VISION_INPUT, *never),
    ]
    assert all(isinstance(s, CapabilityState) for s in states)


def test_an_encoders_generative_capabilities_are_not_applicable_with_nothing_asked() -> None:
    plan = qualification_plan("bert")
    why = "bert is an encoder: it embeds text and cannot generate any"
    assert plan.tasks == (Task.EMBED, Task.RERANK)
    assert [(p.capability, p.outcome, p.asked, p.answered, p.why) for p in plan.not_applicable] == [
        (C.CHAT, ProbeOutcome.NOT_APPLICABLE, "", "", why),
        (C.TOOLS, ProbeOutcome.NOT_APPLICABLE, "", "", why),
        (C.STRUCTURED_OUTPUT, ProbeOutcome.NOT_APPLICABLE, "", "", why),
        (C.VISION_INPUT, ProbeOutcome.NOT_APPLICABLE, "", "", why),
    ]


def test_chat_refused_for_an_encoder_says_why_it_does_not_apply() -> None:
    why = "bert is an encoder: it embeds text and cannot generate any"
    na = ProbeResult(
        capability=C.CHAT, outcome=ProbeOutcome.NOT_APPLICABLE, asked="", answered="", why=why
    )
    refused = task_refusal(catalog=None, evidence=evidence(na), task=Task.CHAT, model="minilm")
    assert refused is not None
    assert refused.sentence == (
        f"minilm has not proved it can chat (chat does not apply to it: {why}); "
        "run nodeau model qualify minilm, or pass --unproved to serve it anyway"
    )


def test_a_refusal_lists_everything_the_catalog_entry_claims() -> None:
    refused = task_refusal(
        catalog=frozenset({C.EMBED, C.RERANK}), evidence=None, task=Task.CHAT, model="minilm"
    )
    assert refused is not None
    assert refused.sentence == (
        "minilm has not proved it can chat (its catalog entry claims embed, rerank; it was "
        "never qualified); run nodeau model qualify minilm, or pass --unproved to serve it anyway"
    )


def test_a_runs_card_measurements_carry_the_note_they_were_taken_with() -> None:
    nvml = MemoryReading(
        task=Task.CHAT, config_key="task=chat", peak_bytes=1, source=MemorySource.NVML
    )
    assert card_measurements(evidence(memory=(nvml,)), "qualified on m1") == (
        Measurement(
            key=MeasuredKey(artifact_id=ARTIFACT.hex, gpu_model="RTX 4090", config_key="task=chat"),
            peak_bytes=1,
            note="qualified on m1",
        ),
    )


def test_a_peak_is_at_least_one_byte() -> None:
    with pytest.raises(ValueError, match=r"^a peak must be positive, got 0$"):
        MemoryReading(task=Task.CHAT, config_key="c", peak_bytes=0, source=MemorySource.NVML)


def test_an_ambiguous_name_lists_each_artifact_and_the_machines_holding_it() -> None:
    a, b = "a" * 64, "b" * 64
    known = [
        Known(artifact_id=a, names=("qwen",), where="m2"),
        Known(artifact_id=a, names=("qwen",), where="m1"),
        Known(artifact_id=b, names=("qwen",)),
    ]
    found = resolve_name("qwen", known)
    assert isinstance(found, Unresolved)
    assert found.sentence == (
        f"qwen names 2 different artifacts ({a[:12]} on m1, m2; {b[:12]}); "
        "ask for one by its SHA-256 prefix"
    )
