"""The controller's check of proved capabilities: a service runs only for a task its model
claims (its catalog entry, or its newest qualification), unless its spec says it is served
unproved on purpose; pure, no cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from attrs import evolve
from returns.pipeline import is_successful

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.kube.objects import ask_of
from nodeau.adapters.kube.workloads import spec_of_ask
from nodeau.apps.controller.loop import Controller
from nodeau.apps.controller.reading import proved_reader
from nodeau.apps.settings import shipped_catalog
from nodeau.domain.artifacts import Sha256
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.catalog import Catalog
from nodeau.domain.fleet_admission import Proved
from nodeau.domain.qualification import (
    Capability,
    EvidenceBook,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
    record,
)
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.cluster import ClusterError
from tests.support.builders.controller_decisions import EMPTY, artifact, ask, decider, marks, report
from tests.support.fakes.controller_fleet import SERVICE, fleet_plane, held_cards
from tests.support.fakes.controller_fleet import fleet as reconcile_fleet
from tests.support.fakes.controller_fleet import state as reconcile_state
from tests.support.fakes.fake_cluster import FakeCluster
from tests.support.real.kube_controller import HUGE_ID, SMALL_ID

SHIPPED = JsonCatalogFile(shipped_catalog()).load()
[SMOL] = SHIPPED.entries
SMOL_ID = SMOL.entry.artifact().id.hex
FLEET = (report("m1", 4, artifact(SMALL_ID, "qwen"), artifact(SMOL_ID, "smol")),)
NO_EVIDENCE = Proved(catalog=SHIPPED, evidence=EvidenceBook.empty())


def qualified(artifact_id: str, **outcomes: ProbeOutcome) -> EvidenceBook:
    """A book with one run of ``artifact_id`` whose probes ended as ``outcomes``."""
    run = QualificationEvidence(
        artifact_id=Sha256(hex=artifact_id),
        gpu_model="NVIDIA L4",
        runtime="llama-server (test)",
        at=datetime(2026, 11, 30, 20, 5, tzinfo=UTC),
        context_tokens=1024,
        memory=(),
        probes=tuple(
            ProbeResult(capability=Capability(c), outcome=o, asked="a", answered="b", why="c")
            for c, o in outcomes.items()
        ),
    )
    return record(EvidenceBook.empty(), run)


def decided(wanted: WorkloadAsk, proved: Proved | None, fleet: Any = FLEET) -> Refusal | None:
    """The refusal the controller records for ``wanted``, or None when it is admitted."""
    result = decider(wanted, reports=fleet, marks=marks("m1"), health={}, now=datetime.now(UTC),
                     proved=proved)(EMPTY)  # fmt: skip
    return None if is_successful(result) else result.failure()


def service(model: str, task: Task = Task.CHAT, *, unproved: bool = False) -> WorkloadAsk:
    return evolve(ask(model=model), task=task, unproved=unproved)


def test_an_imported_model_never_qualified_is_refused_with_the_clis_code_and_sentence() -> None:
    refusal = decided(service("qwen"), NO_EVIDENCE)
    assert refusal is not None
    assert (refusal.kind, refusal.code) == (
        RefusalKind.QUALIFICATION,
        ReasonCode.TASK_NOT_PROVED,
    )
    assert refusal.sentence == (
        "qwen has not proved it can chat (it was never qualified); run nodeau model qualify "
        "qwen, or pass --unproved to serve it anyway"
    )


def test_the_same_service_served_unproved_on_purpose_is_admitted() -> None:
    assert decided(service("qwen", unproved=True), NO_EVIDENCE) is None


def test_a_task_its_newest_qualification_proved_is_admitted_and_one_it_failed_is_not() -> None:
    book = qualified(SMALL_ID, chat=ProbeOutcome.PASSED, embed=ProbeOutcome.FAILED)
    proved = Proved(catalog=SHIPPED, evidence=book)
    assert decided(service("qwen"), proved) is None
    refusal = decided(service("qwen", Task.EMBED), proved)
    assert refusal is not None and refusal.code is ReasonCode.TASK_NOT_PROVED
    assert "qwen has not proved it can embed (its embed probe failed on 2026-11-30 20:05)" in (
        refusal.sentence
    )
    refusal = decided(service("qwen", Task.RERANK), proved)
    assert refusal is not None and "(qualification did not probe rerank)" in refusal.sentence


def test_the_curated_catalog_entry_listing_its_bytes_counts_as_proved() -> None:
    assert [c.value for c in SMOL.capabilities] == ["chat", "structured-output"]
    assert decided(service("smol"), NO_EVIDENCE) is None
    refusal = decided(service("smol", Task.EMBED), NO_EVIDENCE)
    assert refusal is not None
    assert refusal.sentence.startswith(
        "smol has not proved it can embed (its catalog entry claims chat, structured-output; "
        "it was never qualified)"
    )
    # the catalog claims for bytes, not for names: without it the same bytes must prove it
    assert decided(service("smol"), Proved(catalog=Catalog(), evidence=EvidenceBook.empty()))


def test_evidence_is_the_artifacts_never_the_names_earlier_bytes() -> None:
    book = qualified(SMALL_ID, chat=ProbeOutcome.PASSED)
    renamed = (report("m1", 4, artifact(HUGE_ID, "qwen", gib=4)),)  # other bytes, same name
    refusal = decided(service("qwen"), Proved(catalog=SHIPPED, evidence=book), renamed)
    assert refusal is not None and "(it was never qualified)" in refusal.sentence


def test_a_model_no_machine_holds_is_no_verified_copy_first() -> None:
    refusal = decided(service("llama"), NO_EVIDENCE)
    assert refusal is not None and refusal.code is ReasonCode.NO_VERIFIED_COPY


def test_nothing_is_checked_without_evidence_to_check_against() -> None:
    assert decided(service("qwen"), None) is None


def test_a_batch_job_meets_the_same_gate_as_a_service() -> None:
    job = ask(model="qwen", kind=WorkloadKind.BATCH)
    refusal = decided(job, NO_EVIDENCE)
    assert refusal is not None and refusal.code is ReasonCode.TASK_NOT_PROVED
    assert refusal == decided(service("qwen"), NO_EVIDENCE), "the same code and sentence"
    assert decided(evolve(job, unproved=True), NO_EVIDENCE) is None


def body(kind: str, **spec: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": "chat"}, "spec": {"model": "qwen", **spec}}


def test_the_spec_field_reads_and_writes_as_kubectl_and_the_cli_see_it() -> None:
    assert ask_of(WorkloadKind.SERVICE, body("GPUService", unproved=True)).unproved
    assert not ask_of(WorkloadKind.SERVICE, body("GPUService")).unproved
    assert not ask_of(WorkloadKind.SERVICE, body("GPUService", unproved=False)).unproved
    assert ask_of(WorkloadKind.BATCH, body("BatchJob", unproved=True)).unproved
    batch = spec_of_ask(evolve(ask(model="qwen", kind=WorkloadKind.BATCH), unproved=True))
    assert batch["unproved"] is True
    written = spec_of_ask(service("qwen", unproved=True))
    assert written["unproved"] is True
    assert ask_of(WorkloadKind.SERVICE, {"metadata": {"name": "c"}, "spec": written}).unproved
    assert "unproved" not in spec_of_ask(service("qwen"))


class Kept:
    def __init__(self, book: EvidenceBook) -> None:
        self.book = book
        self.reads = 0

    def evidence(self) -> EvidenceBook:
        self.reads += 1
        return self.book


class Listed:
    def load(self) -> Catalog:
        return SHIPPED


def test_what_counts_as_proved_is_read_from_the_evidence_and_the_catalog() -> None:
    assert proved_reader(None, Listed()) is None  # no evidence: nothing is checked
    kept = Kept(qualified(SMALL_ID, chat=ProbeOutcome.PASSED))
    read = proved_reader(kept, Listed())
    assert read is not None
    assert read() == Proved(catalog=SHIPPED, evidence=kept.book)
    without = proved_reader(kept, None)
    assert without is not None and without().catalog == Catalog()


# -- the controller's pass over the contract-checked fakes


class Unreadable:
    def evidence(self) -> EvidenceBook:
        raise ClusterError("cannot read ConfigMap nodeau-system/nodeau-qualifications: 503")


def checking(cluster: FakeCluster, evidence: Any, lines: list[str]) -> Controller:
    ports = evolve(cluster.controller_ports(), evidence=evidence, catalog=Listed())
    return Controller(ports, clock=cluster.clock, log=lines.append)


def test_a_service_applied_for_a_task_it_did_not_prove_is_refused_in_its_status_and_ps() -> None:
    cluster = reconcile_fleet("m1", cards=2)
    for name, unproved in (("chat", False), ("chat-anyway", True)):
        cluster.objects.create(
            WorkloadAsk(kind=SERVICE, name=name, model="qwen", unproved=unproved)
        )
    cluster.objects.create(WorkloadAsk(kind=WorkloadKind.BATCH, name="job", model="qwen"))
    kept = Kept(EvidenceBook.empty())
    checking(cluster, kept, []).resync()
    assert kept.reads == 1  # once for the pass, whatever it decides
    refused = cluster.objects.get(SERVICE, "chat")
    assert refused is not None and refused.refused
    assert refused.status["refusal"] == {
        "kind": "qualification",
        "code": "qualification.task-not-proved",
        "message": "qwen has not proved it can chat (it was never qualified); run nodeau "
        "model qualify qwen, or pass --unproved to serve it anyway",
    }
    rows = {v.name: v for v in fleet_plane(cluster).serving.workloads()}
    assert rows["chat"].sentence == (
        "refused (qualification): qualification.task-not-proved: "
        f"{refused.status['refusal']['message']}"
    )
    assert rows["chat-anyway"].state == "starting" and rows["job"].state == "starting"
    assert sorted(w for w, _ in held_cards(cluster)) == ["chat-anyway", "job"]

    checking(cluster, kept, []).resync()  # decided: nothing more is read
    assert kept.reads == 1


def test_evidence_that_cannot_be_read_leaves_the_service_undecided_never_refused() -> None:
    cluster = reconcile_fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    lines: list[str] = []
    checking(cluster, Unreadable(), lines).resync()
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and not obj.decided
    assert any("chat: not reconciled this time: cannot read ConfigMap" in x for x in lines)
    checking(cluster, Kept(qualified(SMALL_ID, chat=ProbeOutcome.PASSED)), lines).resync()
    assert reconcile_state(cluster, "chat") is WorkloadState.STARTING
