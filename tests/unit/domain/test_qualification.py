"""Qualification: capabilities are claimed one at a time, per artifact, only once proved."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.aliases import AliasBook, import_under_alias
from nodeau.domain.artifacts import Artifact, ArtifactFile, ArtifactId, Sha256
from nodeau.domain.memory import MeasuredKey
from nodeau.domain.qualification import (
    Capability,
    EvidenceBook,
    MemoryReading,
    MemorySource,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
    capability_states,
    card_measurements,
    claimed_capabilities,
    qualification_plan,
    qualified_line,
    record,
    task_refusal,
)
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind
from nodeau.domain.tasks import Task

AT = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)


def sha(n: int) -> Sha256:
    return Sha256.of_bytes(str(n).encode())


def art(n: int) -> Artifact:
    return Artifact.imported([ArtifactFile(path="model.gguf", size_bytes=100, sha256=sha(n))])


def probe(capability: Capability, passed: bool) -> ProbeResult:
    outcome = ProbeOutcome.PASSED if passed else ProbeOutcome.FAILED
    return ProbeResult(capability=capability, outcome=outcome, asked="q", answered="a", why="w")


def run(
    artifact_id: ArtifactId, *probes: ProbeResult, gpu: str = "RTX 4090"
) -> QualificationEvidence:
    return QualificationEvidence(
        artifact_id=artifact_id,
        gpu_model=gpu,
        runtime="llama-server 0.5.0-dev",
        at=AT,
        context_tokens=512,
        memory=(reading(MemorySource.NVML),),
        probes=probes,
    )


def reading(source: MemorySource, task: Task = Task.CHAT) -> MemoryReading:
    return MemoryReading(
        task=task, config_key=f"task={task.value}", peak_bytes=5_000, source=source
    )


def test_capability_values_are_the_product_words() -> None:
    assert [c.value for c in Capability] == [
        "chat",
        "embed",
        "rerank",
        "tools",
        "structured-output",
        "vision-input",
    ]


@pytest.mark.parametrize(
    ("results", "claimed"),
    [
        ({}, set()),
        ({Capability.CHAT: True, Capability.TOOLS: False}, {Capability.CHAT}),
        ({Capability.CHAT: False}, set()),
        ({Capability.EMBED: True, Capability.RERANK: True}, {Capability.EMBED, Capability.RERANK}),
        (
            {Capability.STRUCTURED_OUTPUT: True, Capability.VISION_INPUT: False},
            {Capability.STRUCTURED_OUTPUT},
        ),
        ({c: True for c in Capability}, set(Capability)),
    ],
)
def test_only_passed_probes_are_claimed(
    results: dict[Capability, bool], claimed: set[Capability]
) -> None:
    evidence = run(sha(1), *(probe(c, ok) for c, ok in results.items()))
    assert claimed_capabilities(evidence) == frozenset(claimed)


def test_importing_is_not_qualifying() -> None:
    assert claimed_capabilities(None) == frozenset()
    book, _ = import_under_alias(AliasBook.empty(), "qwen", art(1))
    assert EvidenceBook.empty().for_alias(book, "qwen") is None
    assert claimed_capabilities(EvidenceBook.empty().for_alias(book, "qwen")) == frozenset()


@given(st.dictionaries(st.sampled_from(list(Capability)), st.booleans()))
def test_claimed_is_exactly_the_passed_set(results: dict[Capability, bool]) -> None:
    evidence = run(sha(1), *(probe(c, ok) for c, ok in results.items()))
    claimed = claimed_capabilities(evidence)
    assert claimed == frozenset(c for c, ok in results.items() if ok)
    assert claimed.isdisjoint(c for c, ok in results.items() if not ok)


def test_evidence_validation() -> None:
    with pytest.raises(ValueError, match="probes a capability twice"):
        run(sha(1), probe(Capability.CHAT, True), probe(Capability.CHAT, False))
    with pytest.raises(ValueError, match="names the GPU model"):
        run(sha(1), gpu=" ")
    with pytest.raises(ValueError, match="names the runtime"):
        evolve(run(sha(1)), runtime="")
    with pytest.raises(ValueError, match="peak must be positive, got 0"):
        evolve(reading(MemorySource.NVML), peak_bytes=0)


def test_only_a_cards_own_reading_becomes_a_measurement_for_admission() -> None:
    both = evolve(
        run(sha(1)),
        memory=(reading(MemorySource.NVML), reading(MemorySource.RUNTIME_BUFFERS, Task.EMBED)),
    )
    (kept,) = card_measurements(both, note="qualified")
    assert kept.key == MeasuredKey(
        artifact_id=sha(1).hex, gpu_model="RTX 4090", config_key="task=chat"
    )
    assert kept.peak_bytes == 5_000
    simulated = evolve(both, memory=(reading(MemorySource.RUNTIME_BUFFERS),))
    assert card_measurements(simulated, note="qualified") == ()


def refusal_for(
    evidence: QualificationEvidence | None,
    task: Task,
    catalog: frozenset[Capability] | None = None,
) -> Refusal | None:
    return task_refusal(catalog=catalog, evidence=evidence, task=task, model="mine")


def test_an_imported_model_runs_only_the_tasks_it_proved() -> None:
    imported = art(1)
    never = refusal_for(None, Task.CHAT)
    assert never is not None
    assert never.code is ReasonCode.TASK_NOT_PROVED
    assert never.kind is RefusalKind.QUALIFICATION
    assert never.sentence == (
        "mine has not proved it can chat (it was never qualified); run nodeau model qualify "
        "mine, or pass --unproved to serve it anyway"
    )
    chat_only = run(imported.id, probe(Capability.CHAT, True), probe(Capability.EMBED, False))
    assert refusal_for(chat_only, Task.CHAT) is None
    failed = refusal_for(chat_only, Task.EMBED)
    assert failed is not None
    assert "(its embed probe failed on 2026-11-30 18:00)" in failed.sentence
    unprobed = refusal_for(chat_only, Task.RERANK)
    assert unprobed is not None
    assert "(qualification did not probe rerank)" in unprobed.sentence


def test_bytes_a_catalog_entry_lists_claim_what_the_entry_claims_and_what_they_proved() -> None:
    listed = frozenset({Capability.CHAT})
    assert refusal_for(None, Task.CHAT, listed) is None
    refused = refusal_for(None, Task.EMBED, listed)
    assert refused is not None
    assert "(its catalog entry claims chat; it was never qualified)" in refused.sentence
    proved = run(art(1).id, probe(Capability.EMBED, True))
    assert refusal_for(proved, Task.EMBED, listed) is None
    nothing = refusal_for(None, Task.CHAT, frozenset())
    assert nothing is not None
    assert "its catalog entry claims nothing" in nothing.sentence


def test_an_encoder_is_not_probed_for_what_it_cannot_generate() -> None:
    causal = qualification_plan("llama")
    assert causal.tasks == (Task.CHAT, Task.EMBED, Task.RERANK)
    assert causal.not_applicable == ()
    encoder = qualification_plan("bert")
    assert encoder.tasks == (Task.EMBED, Task.RERANK)
    assert {p.capability for p in encoder.not_applicable} == {
        Capability.CHAT,
        Capability.TOOLS,
        Capability.STRUCTURED_OUTPUT,
        Capability.VISION_INPUT,
    }
    assert all(p.outcome is ProbeOutcome.NOT_APPLICABLE for p in encoder.not_applicable)
    assert all("bert is an encoder" in p.why for p in encoder.not_applicable)


def test_evidence_book_keeps_every_run_and_answers_with_the_newest() -> None:
    first = run(sha(1), probe(Capability.CHAT, True), probe(Capability.TOOLS, True))
    second = run(sha(1), probe(Capability.CHAT, True), probe(Capability.TOOLS, False), gpu="A10")
    book = record(record(EvidenceBook.empty(), first), second)
    assert book.history(sha(1)) == (first, second)
    assert book.for_artifact(sha(1)) == second
    assert claimed_capabilities(book.for_artifact(sha(1))) == {Capability.CHAT}
    assert book.for_artifact(sha(2)) is None
    assert book.history(sha(2)) == ()


def test_recording_is_pure_and_files_evidence_under_its_own_artifact() -> None:
    empty = EvidenceBook.empty()
    book = record(empty, run(sha(1), probe(Capability.CHAT, True)))
    assert empty.for_artifact(sha(1)) is None
    assert set(book.runs) == {sha(1)}


def test_book_rejects_misfiled_or_empty_evidence() -> None:
    with pytest.raises(ValueError, match="evidence of another artifact"):
        EvidenceBook(runs={sha(2): (run(sha(1)),)})
    with pytest.raises(ValueError, match="empty evidence list"):
        EvidenceBook(runs={sha(1): ()})


def test_evidence_does_not_carry_across_an_alias() -> None:
    old, new = art(1), art(2)
    aliases, _ = import_under_alias(AliasBook.empty(), "qwen", old)
    qualified = run(old.id, probe(Capability.CHAT, True), probe(Capability.TOOLS, True))
    evidence = record(EvidenceBook.empty(), qualified)
    assert evidence.for_alias(aliases, "qwen") == qualified

    aliases, _ = import_under_alias(aliases, "qwen", new)
    assert evidence.for_alias(aliases, "qwen") is None
    assert claimed_capabilities(evidence.for_alias(aliases, "qwen")) == frozenset()
    # the old artifact keeps its own evidence, reachable by its id
    assert evidence.for_artifact(old.id) == qualified

    requalified = run(new.id, probe(Capability.CHAT, True), probe(Capability.TOOLS, False))
    evidence = record(evidence, requalified)
    assert evidence.for_alias(aliases, "qwen") == requalified
    assert claimed_capabilities(evidence.for_alias(aliases, "qwen")) == {Capability.CHAT}


def test_unknown_alias_has_no_evidence() -> None:
    evidence = record(EvidenceBook.empty(), run(sha(1), probe(Capability.CHAT, True)))
    assert evidence.for_alias(AliasBook.empty(), "qwen") is None


def test_model_info_states_come_from_the_newest_run_then_the_catalog() -> None:
    never = capability_states(None, None)
    assert {s.state for s in never} == {"never qualified"}
    listed = frozenset({Capability.CHAT})
    catalogued = {s.capability: s.state for s in capability_states(None, listed)}
    assert catalogued[Capability.CHAT] == "catalog"
    assert catalogued[Capability.TOOLS] == "never qualified"
    newest = run(sha(1), probe(Capability.CHAT, True), probe(Capability.TOOLS, False))
    states = {s.capability: (s.state, s.evidence) for s in capability_states(newest, None)}
    assert states[Capability.CHAT] == ("passed", "w")
    assert states[Capability.TOOLS] == ("failed", "w")
    assert states[Capability.EMBED] == ("not probed", "")
    both = {s.capability: (s.state, s.evidence) for s in capability_states(newest, listed)}
    assert both[Capability.CHAT] == ("passed", "w; the catalog entry claims it")
    assert qualified_line(newest).startswith("2026-11-30 18:00 UTC on RTX 4090, llama-server")
