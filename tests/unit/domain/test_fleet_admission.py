"""A fleet's admission of one object (``domain.fleet_admission``) and the Pod it asks for."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from attrs import evolve
from returns.pipeline import is_successful
from returns.result import Result

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.objects import ask_of
from nodeau.adapters.kube.pods import PodImages, pod_manifest
from nodeau.adapters.kube.report_form import MachineReport
from nodeau.domain.allowances import Allowances
from nodeau.domain.catalog import Catalog
from nodeau.domain.fleet_admission import (
    Decide,
    Planning,
    Proved,
    fleet_of,
    planning,
    resolve,
    unproved_refusal,
)
from nodeau.domain.fleet_admission import decider as controller_decider
from nodeau.domain.fleet_reports import MarkedFleet
from nodeau.domain.hardware import Fleet, Gpu, GpuReading, Machine, MachineReading
from nodeau.domain.health import Health, MachineHealth, Signal
from nodeau.domain.memory import GIB, MIB, MeasuredKey, MeasuredTable, Measurement
from nodeau.domain.model_info import runtime_config
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.plans import ENTERPRISE, HOME
from nodeau.domain.qualification import EvidenceBook
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, WorkloadState
from nodeau.ports.state import Snapshot
from tests.support.builders.architectures import TINY
from tests.support.builders.controller_decisions import (
    EMPTY,
    HUGE,
    NOW,
    SMALL,
    admitted,
    artifact,
    ask,
    decider,
    marks,
    report,
)
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.fake_runtime import SEES_A_CARD
from tests.support.real.kube_controller import SMALL_ID

FLEET = (
    report("m1", 1, artifact(SMALL, "qwen", path="/models/m1/qwen.gguf")),
    report("m2", 2, artifact(SMALL, "qwen-alias", path="/models/m2/q.gguf")),
    report("m3", 4),  # free cards, no copy of anything
)


@pytest.mark.parametrize("text", ["qwen", "qwen-alias", SMALL, SMALL[:6], "sha256:" + SMALL[:10]])
def test_a_model_is_found_by_any_name_its_id_or_a_prefix(text: str) -> None:
    found = resolve(text, FLEET).unwrap()
    assert found.artifact_id == SMALL
    assert found.names == ("qwen", "qwen-alias")
    assert found.paths == (("m1", "/models/m1/qwen.gguf"), ("m2", "/models/m2/q.gguf"))


@pytest.mark.parametrize("text", ["llama", SMALL[:5], "zz" + SMALL[:8]])
def test_a_model_no_machine_holds_is_refused_as_capacity_no_verified_copy(text: str) -> None:
    refusal = resolve(text, FLEET).failure()
    assert (refusal.kind, refusal.code) == (RefusalKind.CAPACITY, ReasonCode.NO_VERIFIED_COPY)
    assert text in refusal.sentence


def test_a_name_given_to_two_different_artifacts_is_refused_naming_both() -> None:
    fleet = (report("m1", 1, artifact(SMALL, "qwen")), report("m2", 1, artifact(HUGE, "qwen")))
    refusal = resolve("qwen", fleet).failure()
    assert refusal.code is ReasonCode.NO_VERIFIED_COPY
    assert f"{SMALL[:12]} on m1" in refusal.sentence and f"{HUGE[:12]} on m2" in refusal.sentence


def test_admission_places_on_a_machine_holding_the_copy_and_uses_its_path() -> None:
    decide = decider(ask(), reports=FLEET, marks=marks("m1", "m2", "m3"), health={}, now=NOW)
    a = admitted(decide(EMPTY))
    w = a.record.workload
    assert w.machine in {"m1", "m2"}
    assert w.gpu_uuid.startswith(f"GPU-{w.machine}-")
    assert a.record.model_path == dict(m1="/models/m1/qwen.gguf", m2="/models/m2/q.gguf")[w.machine]
    assert (w.kind, w.state, w.since, w.model, w.artifact_id) == (
        WorkloadKind.SERVICE, WorkloadState.ADMITTED, NOW, "qwen", SMALL,
    )  # fmt: skip
    assert a.placement.reservation.bytes == a.admitted.prediction_for("NVIDIA L4").total_bytes
    assert a.record.config.context_tokens == TINY.context_length  # the model's own (< 4096)
    assert a.decided_at == NOW


def test_the_decision_reads_the_snapshots_ledger() -> None:
    decide = decider(ask(), reports=FLEET, marks=marks("m1", "m2", "m3"), health={}, now=NOW)
    held = Ledger(
        reservations=tuple(
            Reservation(workload=f"w{u}", machine=m, gpu_uuid=u, bytes=GIB)
            for m, u in (("m1", "GPU-m1-0"), ("m2", "GPU-m2-0"))
        )
    )
    a = admitted(decide(Snapshot(ledger=held, workloads=())))
    assert (a.record.workload.machine, a.record.workload.gpu_uuid) == ("m2", "GPU-m2-1")
    full = Ledger(
        reservations=(
            *held.reservations,
            Reservation(workload="x", machine="m2", gpu_uuid="GPU-m2-1", bytes=GIB),
        )
    )
    refusal = decide(Snapshot(ledger=full, workloads=())).failure()
    assert refusal.code is ReasonCode.NO_VERIFIED_COPY  # m3's cards are free: the nearer fix
    assert "on m3" in refusal.sentence
    without_m3 = decider(ask(), reports=FLEET, marks=marks("m1", "m2"), health={}, now=NOW)
    refusal = without_m3(Snapshot(ledger=full, workloads=())).failure()
    assert refusal.code is ReasonCode.NO_FREE_CARD
    assert "GPU-m2-1 on m2 by x" in refusal.sentence


def test_a_model_too_big_for_every_card_is_refused_as_capacity() -> None:
    fleet = (report("m1", 2, artifact(HUGE, "giant", gib=40)),)
    decide = decider(ask(model="giant"), reports=fleet, marks=marks("m1"), health={}, now=NOW)
    refusal = decide(EMPTY).failure()
    assert (refusal.kind, refusal.code) == (RefusalKind.CAPACITY, ReasonCode.NO_CARD_LARGE_ENOUGH)
    assert "GPU-m1-" in refusal.sentence


def test_drained_and_unreachable_machines_are_never_chosen() -> None:
    unreachable = MachineHealth(
        state=Health.UNREACHABLE,
        since=NOW,
        quiet=frozenset({Signal.AGENT_REPORT, Signal.NODE_HEARTBEAT}),
        sentence="unreachable",
    )
    decide = decider(
        ask(),
        reports=FLEET,
        marks=marks("m1", "m2", "m3", drained=("m2",)),
        health={"m1": unreachable},
        now=NOW,
    )
    refusal = decide(EMPTY).failure()
    assert (refusal.kind, refusal.code) == (RefusalKind.CAPACITY, ReasonCode.NO_ELIGIBLE_MACHINE)
    only_m1_drained = decider(
        ask(), reports=FLEET, marks=marks("m1", "m2", "m3", drained=("m1",)), health={}, now=NOW
    )
    assert admitted(only_m1_drained(EMPTY)).record.workload.machine == "m2"


def test_a_report_from_a_machine_that_is_no_node_is_not_part_of_the_fleet() -> None:
    by_id = ask(model=SMALL[:8])
    decide = decider(by_id, reports=FLEET, marks=marks("m2", "m3"), health={}, now=NOW)
    assert admitted(decide(EMPTY)).record.workload.machine == "m2"
    named_on_m1_only = decider(ask(), reports=FLEET, marks=marks("m2", "m3"), health={}, now=NOW)
    assert named_on_m1_only(EMPTY).failure().code is ReasonCode.NO_VERIFIED_COPY
    gone = decider(by_id, reports=FLEET, marks=marks("m3"), health={}, now=NOW)
    assert gone(EMPTY).failure().code is ReasonCode.NO_VERIFIED_COPY


def test_the_policy_of_the_marks_decides_between_machines() -> None:
    fleet = (report("m1", 2, artifact(SMALL, "qwen")), report("m2", 2, artifact(SMALL, "qwen")))
    one_held = Snapshot(
        ledger=Ledger(
            reservations=(Reservation(workload="x", machine="m1", gpu_uuid="GPU-m1-0", bytes=GIB),)
        ),
        workloads=(),
    )
    packed = decider(ask(), reports=fleet, marks=marks("m1", "m2"), health={}, now=NOW)
    assert admitted(packed(one_held)).record.workload.machine == "m1"
    spread = SchedulingSettings(fleet_policy=Policy.PACK, overrides=(("m2", Policy.SPREAD),))
    spreading = decider(
        ask(), reports=fleet, marks=marks("m1", "m2", settings=spread), health={}, now=NOW
    )
    assert admitted(spreading(one_held)).record.workload.machine == "m2"


def obj(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": r.API_VERSION, "kind": kind, "metadata": {"name": "x", "uid": "u"},
            "spec": spec}  # fmt: skip


def test_a_spec_is_read_with_the_schemas_defaults_and_the_domains_rules() -> None:
    service = ask_of(WorkloadKind.SERVICE, obj("GPUService", {"model": "qwen"}))
    assert (service.task, service.context_tokens, service.recovery, service.endpoint_stopped) == (
        Task.CHAT, None, RecoveryMode.NEVER, False,
    )  # fmt: skip
    assert service.recovery_after == timedelta(seconds=180)
    full = ask_of(
        WorkloadKind.SERVICE,
        obj("GPUService", {"model": "q", "task": "embed", "contextTokens": 8192,
                           "recovery": "automatic", "recoveryAfterSeconds": 0,
                           "endpoint": "stopped"}),
    )  # fmt: skip
    assert (full.task, full.context_tokens, full.recovery, full.endpoint_stopped) == (
        Task.EMBED, 8192, RecoveryMode.AUTOMATIC, True,
    )  # fmt: skip
    assert full.recovery_after == timedelta(seconds=1)
    batch = ask_of(WorkloadKind.BATCH, obj("BatchJob", {"model": "q", "recovery": "automatic"}))
    assert (batch.recovery, batch.endpoint_stopped) == (RecoveryMode.NEVER, False)


@pytest.mark.parametrize(
    ("task", "flags"),
    [
        (Task.CHAT, set()),
        (Task.EMBED, {"--embeddings"}),
        (Task.RERANK, {"--rerank", "--embeddings"}),
    ],
)
def test_the_pod_is_pinned_to_the_machine_and_card_and_runs_the_admitted_config(
    task: Task, flags: set[str]
) -> None:
    decide = decider(
        evolve(ask(), task=task, context_tokens=2048),
        reports=FLEET,
        marks=marks("m1"),
        health={},
        now=NOW,
    )
    record = admitted(decide(EMPTY)).record
    pod = pod_manifest(record, owner_uid="uid-1")
    spec = pod["spec"]
    (container,) = spec["containers"]
    args = container["args"]
    assert pod["metadata"]["name"] == "service-chat"
    assert pod["metadata"]["labels"][r.WORKLOAD_LABEL] == "chat"
    assert pod["metadata"]["labels"][r.KIND_LABEL] == "service"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert spec["nodeName"] == "m1" and spec["restartPolicy"] == "Always"
    assert container["env"] == [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-m1-0"},
        {  # the key it refuses every request without: the workload's Secret, never a value
            "name": "LLAMA_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "service-chat-key", "key": "api-key"}},
        },
    ]
    assert container["image"] == r.SERVER_IMAGE
    assert args[args.index("--model") + 1] == "/models/m1/qwen.gguf"
    assert args[args.index("--ctx-size") + 1] == "2048"
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert args[args.index("--port") + 1] == str(r.SERVER_PORT)
    assert {"--embeddings", "--rerank"} & set(args) == flags
    assert spec["volumes"][0]["hostPath"]["path"] == "/models/m1"
    assert container["volumeMounts"][0] == {"name": "models", "mountPath": "/models/m1",
                                            "readOnly": True}  # fmt: skip
    # a start that does not answer within 5 s x 24 = 120 s is ended by the kubelet
    assert container["startupProbe"] == {
        "httpGet": {"path": "/health", "port": r.SERVER_PORT},
        "periodSeconds": 5,
        "failureThreshold": 24,
    }


def test_a_batch_jobs_pod_restarts_only_a_container_that_failed() -> None:
    decide = decider(
        ask(name="nightly", kind=WorkloadKind.BATCH),
        reports=FLEET,
        marks=marks("m1"),
        health={},
        now=NOW,
    )
    pod = pod_manifest(admitted(decide(EMPTY)).record, owner_uid="u")
    assert pod["metadata"]["name"] == "batch-nightly"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == r.BATCHJOB_KIND
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert [c["name"] for c in pod["spec"]["containers"]] == ["server", "worker"]
    # both containers read the server's key from the job's Secret
    key = {"secretKeyRef": {"name": "batch-nightly-key", "key": "api-key"}}
    server, worker = pod["spec"]["containers"]
    assert {"name": "LLAMA_API_KEY", "valueFrom": key} in server["env"]
    assert worker["env"] == [{"name": "NODEAU_SERVER_KEY", "valueFrom": key}]
    # the images are the controller's --server-image and --worker-image
    images = PodImages(server="registry.example/llama-server:cuda", nodeau="registry.example/n:1")
    pod = pod_manifest(admitted(decide(EMPTY)).record, owner_uid="u", images=images)
    assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
        "server": "registry.example/llama-server:cuda",
        "worker": "registry.example/n:1",
    }


def test_the_plans_bounds_leave_machines_out_and_refusing_for_them_is_a_limit() -> None:
    # Home covers two machines, counted by name: m1 and m2 (whose cards are all held)
    held = Ledger(
        reservations=tuple(
            Reservation(workload=f"w{u}", machine=m, gpu_uuid=u, bytes=GIB)
            for m, u in (("m1", "GPU-m1-0"), ("m2", "GPU-m2-0"), ("m2", "GPU-m2-1"))
        )
    )
    fleet = (*FLEET[:2], report("m3", 4, artifact(SMALL, "qwen", path="/models/m3/q.gguf")))
    on_home = controller_decider(
        ask(), reports=fleet, marks=marks("m1", "m2", "m3"), health={}, now=NOW, plan=HOME
    )
    refusal = on_home(Snapshot(ledger=held, workloads=())).failure()
    assert (refusal.kind.value, refusal.code) == ("limit", ReasonCode.MACHINES_OVER_PLAN)
    assert refusal.sentence == (
        "every card that can take qwen is beyond what the Home plan covers (2 machines; on "
        "m3); an entitlement for a larger plan covers them (nodeau plan)"
    )
    unbounded = decider(ask(), reports=fleet, marks=marks("m1", "m2", "m3"), health={}, now=NOW)
    assert admitted(unbounded(Snapshot(ledger=held, workloads=()))).record.workload.machine == "m3"


def test_the_organisations_limits_apply_to_the_fleets_decisions() -> None:
    from nodeau.domain.limits import OrgLimits, Role
    from nodeau.domain.organisation import Organisation, Requester

    alice = Requester(user="alice")

    def decide_under(limits: OrgLimits, requester: Requester | None = alice) -> Decide:
        org = Organisation(limits=limits, everyone=Role.OPERATOR, contact="#gpu")
        return decider(
            evolve(ask(), requester=requester), reports=FLEET, marks=marks("m1", "m2", "m3"),
            health={}, now=NOW, organisation=org,
        )  # fmt: skip

    small = decide_under(OrgLimits(max_context_tokens=8))(EMPTY).failure()
    assert (small.kind.value, small.code) == ("limit", ReasonCode.CONTEXT_OVER_LIMIT)
    assert small.sentence.endswith("the organisation's limit is 8; ask #gpu.")
    other = decide_under(OrgLimits(allowed_models=frozenset({"llama"})))(EMPTY).failure()
    assert (other.kind.value, other.code) == ("permission", ReasonCode.MODEL_NOT_PERMITTED)
    only_m2 = admitted(decide_under(OrgLimits(allowed_machines=frozenset({"m2"})))(EMPTY))
    assert only_m2.record.workload.machine == "m2"
    assert only_m2.record.requester == alice  # whose quotas it spends, kept with its record
    nobody = decide_under(OrgLimits(), requester=None)(EMPTY).failure()
    assert (nobody.kind.value, nobody.code) == ("permission", ReasonCode.REQUESTER_UNKNOWN)
    only_m3 = decide_under(OrgLimits(allowed_machines=frozenset({"m3"})))(EMPTY).failure()
    # the cards that could take it (m1, m2 hold the copies) are outside the limits: said so
    assert (only_m3.kind.value, only_m3.code) == ("limit", ReasonCode.MACHINE_NOT_ALLOWED)
    assert "outside the organisation's limits (m1, m2)" in only_m3.sentence


def test_a_model_no_machine_holds_is_refused_with_the_whole_sentence() -> None:
    refusal = resolve("llama", FLEET).failure()
    assert refusal.code is ReasonCode.NO_VERIFIED_COPY
    assert refusal.sentence == (
        "llama: no machine in the fleet holds a verified copy of a model by that name or id "
        "(at least 6 hex digits); pull or import it on a machine, then run it"
    )


def test_the_control_plane_machine_is_marked_in_the_fleet_and_no_other() -> None:
    fleet = fleet_of(
        (report("cp", 1), report("m1", 1)),
        MarkedFleet(
            nodes=("cp", "m1"),
            drained=frozenset(),
            upgrading=frozenset(),
            control_plane=frozenset({"cp"}),
            settings=SchedulingSettings(),
        ),
    )
    assert {m.name: m.control_plane for m in fleet.machines} == {"cp": True, "m1": False}


def planned_for(model: str, fleet: Fleet | None = None) -> Result[Planning, Refusal]:
    """The controller's planning of ``model`` over FLEET's three machines."""
    return planning(
        ask(model=model),
        reports=FLEET,
        marks=marks("m1", "m2", "m3"),
        health={},
        plan=ENTERPRISE,
        fleet=fleet,
    )


def test_planning_uses_the_fleet_it_is_given_rather_than_making_one() -> None:
    given = Fleet(
        machines=(
            Machine(
                name="m1", gpus=(Gpu(uuid="GPU-given", model="NVIDIA L4", total_bytes=24 * GIB),)
            ),
        )
    )
    planned = planned_for("qwen", given).unwrap()
    assert planned.fleet is given


def test_the_request_and_the_limits_read_the_name_the_person_typed_and_the_artifact() -> None:
    planned = planned_for("qwen-alias").unwrap()
    assert planned.request.model == "qwen-alias"  # the second name: not the first one
    assert planned.shape.model == "qwen-alias"
    assert planned.shape.artifact_id == SMALL_ID


def test_a_resolution_shows_the_name_typed_when_it_is_one_of_its_names() -> None:
    found = resolve("qwen-alias", FLEET).unwrap()
    assert found.display_name("qwen-alias") == "qwen-alias"
    assert found.display_name(SMALL_ID[:8]) == "qwen"
    nameless = resolve(SMALL_ID[:8], (report("m9", 1, artifact(SMALL_ID)),)).unwrap()
    assert nameless.display_name(SMALL_ID[:8]) == SMALL_ID[:12]


def test_an_unproved_task_is_refused_under_the_name_the_person_typed() -> None:
    found = resolve("qwen-alias", FLEET).unwrap()
    refusal = unproved_refusal(
        ask(model="qwen-alias"), found, Proved(catalog=Catalog(), evidence=EvidenceBook.empty())
    )
    assert refusal is not None
    assert refusal.code is ReasonCode.TASK_NOT_PROVED
    assert refusal.sentence.startswith("qwen-alias has not proved it can chat (")


def test_the_decision_plans_with_the_measured_table_it_is_given() -> None:
    config = runtime_config(SUMMARY, Task.CHAT, None)
    table = MeasuredTable(
        measurements=(
            Measurement(
                key=MeasuredKey(
                    artifact_id=SMALL_ID, gpu_model="NVIDIA L4", config_key=config.key()
                ),
                peak_bytes=5 * GIB,
            ),
        )
    )
    fleet = (report("m1", 1, artifact(SMALL_ID, "qwen")),)
    decision = admitted(decider(ask(), reports=fleet, marks=marks("m1"), health={}, now=NOW,
                                table=table)(EMPTY))  # fmt: skip
    prediction = decision.admitted.prediction_for("NVIDIA L4")
    assert prediction.source.value == "measured"
    assert decision.placement.reservation.bytes == prediction.total_bytes


def test_the_decision_plans_with_the_allowances_it_is_given() -> None:
    fleet = (report("m1", 1, artifact(SMALL_ID, "qwen")),)
    allowances = Allowances(runtime_footprint_bytes=3 * MIB, margin_percent=0, margin_floor_bytes=0)
    decide = decider(
        ask(), reports=fleet, marks=marks("m1"), health={}, now=NOW, allowances=allowances
    )
    terms = dict(
        (t.name, t.bytes)
        for t in admitted(decide(EMPTY)).admitted.prediction_for("NVIDIA L4").terms
    )
    assert terms["runtime footprint"] == 3 * MIB
    assert terms["margin"] == 0


def test_planning_refuses_what_no_machine_holds_before_anything_else() -> None:
    outcome = planned_for("nothing-here")
    assert not is_successful(outcome)
    assert outcome.failure().code is ReasonCode.NO_VERIFIED_COPY


def real_card_report(machine: str) -> MachineReport:
    """``machine`` with one real card its model server says it can use, and qwen on it."""
    card = Gpu(uuid=f"GPU-{machine}-real", model="NVIDIA H200", total_bytes=141 * GIB)
    reading = MachineReading(
        machine=machine,
        gpus=(GpuReading(gpu=card, free_bytes=card.total_bytes, driver_version="580"),),
        simulated=False,
        note="",
    )
    return MachineReport(
        reading=reading, at=NOW, artifacts=(artifact(SMALL, "qwen"),), server=SEES_A_CARD
    )


def test_a_decision_not_told_of_a_cuda_image_places_on_no_real_card() -> None:
    real = (real_card_report("m1"),)
    unsaid = decider(ask(), reports=real, marks=marks("m1"), health={}, now=NOW)
    refusal = unsaid(EMPTY).failure()
    assert refusal.code is ReasonCode.SERVER_CANNOT_USE_CARD
    assert "--cuda-server-image" in refusal.sentence
    said = decider(ask(), reports=real, marks=marks("m1"), health={}, now=NOW, cuda_image=True)
    assert admitted(said(EMPTY)).record.workload.gpu_uuid == "GPU-m1-real"
    planned = planning(ask(), reports=real, marks=marks("m1"), health={}, plan=ENTERPRISE)
    [(machine, why)] = planned.unwrap().excluded
    assert machine == "m1" and "--cuda-server-image" in why


def test_the_admitted_record_keeps_every_name_of_its_artifact() -> None:
    decide = decider(ask(model="qwen-alias"), reports=FLEET, marks=marks("m1", "m2"),
                     health={}, now=NOW)  # fmt: skip
    w = admitted(decide(EMPTY)).record.workload
    assert (w.model, w.names) == ("qwen-alias", ("qwen", "qwen-alias"))


def test_a_machine_that_lists_one_artifact_twice_holds_one_copy_of_it() -> None:
    twice = report(
        "m1",
        1,
        artifact(SMALL, "qwen", path="/models/m1/a/qwen.gguf"),
        artifact(SMALL, "qwen", path="/models/m1/b/qwen.gguf"),
    )
    found = resolve("qwen", (twice, FLEET[1])).unwrap()
    assert found.artifact_id == SMALL
    assert found.on == frozenset({"m1", "m2"})
    assert found.path_on("m2") == "/models/m2/q.gguf"
