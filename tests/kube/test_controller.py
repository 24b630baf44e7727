"""The fleet controller on a real API server: KWOK nodes, simulated cards, user-made objects.

The controller runs in this process, one resync pass at a time (the same pass
``--once`` runs), so every step is observed after a pass and no test waits on a
clock; KWOK moves the Pods between passes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.health_store import read_health
from nodeau.adapters.kube.marks import write_drained, write_policy
from nodeau.adapters.kube.pods import list_pods, read_pod
from nodeau.adapters.kube.reports import publish_report
from nodeau.adapters.record_json import to_plain, unpack
from nodeau.domain.health import Health
from nodeau.domain.placement import Policy
from nodeau.domain.reservations import Reservation
from nodeau.ports.state import Admission
from tests.support.real.kube_controller import (
    add_machine,
    condition,
    controller,
    create,
    event_reasons,
    get,
    gpu_uuid,
    huge,
    ledger,
    model_path,
    report,
    settle,
    small,
    status,
)


def serving(api: Any, name: str) -> bool:
    st = status(api, name)
    return st.get("state") == "serving" and bool(st.get("endpoint"))


def test_a_service_is_admitted_pinned_to_its_card_and_recorded_serving_at_its_pods_address(
    fresh_fleet: Any,
) -> None:
    """KWOK runs no container: "serving" here is the controller's record once KWOK reports
    the Pod running, at the Pod's address. A real model server answering through the
    endpoint is tests/kube/test_recovery_serving.py's."""
    api = fresh_fleet
    add_machine(api, "m1", 1, small("m1"))
    add_machine(api, "m2", 2)  # free cards but no copy of the model
    create(api, "chat", "qwen", contextTokens=128)
    ctl = controller(api)
    settle(ctl, lambda: serving(api, "chat"), "chat serving")

    st = status(api, "chat")
    assert (st["machine"], st["gpuUUID"], st["source"]) == ("m1", gpu_uuid("m1", 0), "estimated")
    pod = client.CoreV1Api(api).read_namespaced_pod("service-chat", r.NAMESPACE)
    (container,) = pod.spec.containers
    assert pod.spec.node_name == "m1"
    assert {e.name: e.value for e in container.env} == {
        "NVIDIA_VISIBLE_DEVICES": gpu_uuid("m1", 0),
        "LLAMA_API_KEY": None,  # from the workload's Secret, never in the Pod's spec
    }
    [key] = [e for e in container.env if e.name == "LLAMA_API_KEY"]
    assert key.value_from.secret_key_ref.name == "service-chat-key"
    assert container.args[container.args.index("--model") + 1] == model_path("m1", "qwen")
    assert container.args[container.args.index("--ctx-size") + 1] == "128"
    assert pod.metadata.labels[r.WORKLOAD_LABEL] == "chat"
    assert st["endpoint"] == f"http://{pod.status.pod_ip}:{r.SERVER_PORT}/v1"
    for kind in ("Admitted", "Placed", "Ready"):
        assert condition(st, kind)["status"] == "True", kind
    placement = admission_in(st).placement
    assert (placement.machine, placement.gpu_uuid) == ("m1", gpu_uuid("m1", 0))
    assert st["reservedBytes"] == placement.reservation.bytes
    assert st["reservation"] == to_plain(placement.reservation, Reservation)
    assert [(x.workload, x.gpu_uuid) for x in ledger(api)] == [("chat", gpu_uuid("m1", 0))]
    assert {"Admitted", "Started", "Serving"} <= event_reasons(api, "chat")
    assert "Placed" not in event_reasons(api, "chat")  # the Admitted Event says why there
    assert r.FINALIZER in get(api, "chat")["metadata"]["finalizers"]  # type: ignore[index]

    # the endpoint goes off, the model stays loaded
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "chat", {"spec": {"endpoint": "stopped"}}
    )
    settle(ctl, lambda: status(api, "chat").get("endpoint") == "", "endpoint off")
    st = status(api, "chat")
    assert st["state"] == "serving"
    assert (condition(st, "Ready")["status"], condition(st, "Ready")["reason"]) == (
        "False", "EndpointStopped",
    )  # fmt: skip
    assert read_pod(api, "service", "chat") is not None
    assert len(ledger(api)) == 1
    assert "Stopped" in event_reasons(api, "chat")


def test_a_model_too_big_for_every_card_is_refused_and_nothing_is_created(fresh_fleet: Any) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 2, huge("m1"))
    create(api, "big", "giant")
    ctl = controller(api)
    settle(ctl, lambda: status(api, "big").get("state") == "refused", "big refused")
    st = status(api, "big")
    assert st["refusal"]["kind"] == "capacity"
    assert st["refusal"]["code"] == "capacity.no-card-large-enough"
    assert (condition(st, "Admitted")["status"], condition(st, "Admitted")["reason"]) == (
        "False", "Capacity",
    )  # fmt: skip
    ctl.resync()  # a second pass decides nothing again
    assert list_pods(api) == ()
    assert ledger(api) == ()
    assert "Refused" in event_reasons(api, "big")
    # it holds nothing, so nothing guards it: deleting it is immediate
    assert r.FINALIZER not in (get(api, "big") or {})["metadata"].get("finalizers", [])


def test_a_drained_machine_is_never_chosen_and_its_workload_is_untouched(fresh_fleet: Any) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 2, small("m1"))
    add_machine(api, "m2", 2, small("m2"))
    create(api, "first", "qwen")
    ctl = controller(api)
    settle(ctl, lambda: serving(api, "first"), "first serving")
    assert status(api, "first")["machine"] == "m1"  # pack; the tie goes to m1
    before = client.CoreV1Api(api).read_namespaced_pod("service-first", r.NAMESPACE)

    write_drained(api, "m1", datetime.now(UTC))
    create(api, "second", "qwen")
    settle(ctl, lambda: serving(api, "second"), "second serving")
    assert status(api, "second")["machine"] == "m2"  # pack would have chosen m1
    excluded = admission_in(status(api, "second")).placement.excluded
    assert ("m1", "drained") in excluded
    after = client.CoreV1Api(api).read_namespaced_pod("service-first", r.NAMESPACE)
    assert (after.metadata.uid, after.spec.node_name) == (before.metadata.uid, "m1")
    assert (status(api, "first")["state"], status(api, "first")["machine"]) == ("serving", "m1")


def admission_in(st: dict[str, Any]) -> Admission:
    """The admission a status records (packed: it weighs every card assessed)."""
    return unpack(st["admission"], Admission, "the recorded admission")


def test_a_per_machine_policy_changes_new_placements_only(fresh_fleet: Any) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 2, small("m1"))
    add_machine(api, "m2", 2, small("m2"))
    create(api, "a", "qwen")
    ctl = controller(api)
    settle(ctl, lambda: serving(api, "a"), "a serving")
    assert status(api, "a")["machine"] == "m1"
    pod_a = client.CoreV1Api(api).read_namespaced_pod("service-a", r.NAMESPACE).metadata.uid

    write_policy(api, Policy.SPREAD, node="m2")
    create(api, "b", "qwen")
    settle(ctl, lambda: serving(api, "b"), "b serving")
    assert status(api, "b")["machine"] == "m2"  # fleet-wide pack would have chosen m1
    assert admission_in(status(api, "b")).placement.policy is Policy.SPREAD
    assert status(api, "a")["machine"] == "m1"
    assert client.CoreV1Api(api).read_namespaced_pod("service-a", r.NAMESPACE).metadata.uid == pod_a


def test_deleting_a_service_deletes_its_pod_and_frees_its_card(fresh_fleet: Any) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 1, small("m1"))
    create(api, "a", "qwen")
    ctl = controller(api)
    settle(ctl, lambda: serving(api, "a"), "a serving")
    create(api, "b", "qwen")
    settle(ctl, lambda: status(api, "b").get("state") == "refused", "b refused")
    assert status(api, "b")["refusal"]["code"] == "capacity.no-free-card"

    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "a"
    )
    settle(ctl, lambda: get(api, "a") is None, "a gone")
    assert read_pod(api, "service", "a") is None
    assert ledger(api) == ()
    released = client.CoreV1Api(api).list_namespaced_event(
        r.NAMESPACE, field_selector="involvedObject.name=a,reason=Released"
    )
    assert len(released.items) == 1

    create(api, "c", "qwen")
    settle(ctl, lambda: serving(api, "c"), "c serving on the freed card")
    assert status(api, "c")["gpuUUID"] == gpu_uuid("m1", 0)


def test_a_batch_job_whose_pod_has_succeeded_is_recorded_succeeded_and_frees_its_card(
    fresh_fleet: Any,
) -> None:
    """The test sets the Pod's phase as a kubelet would when the job's container exits 0
    (KWOK runs none); a batch job that really runs and finishes is test_batch_fleet.py's."""
    api = fresh_fleet
    add_machine(api, "m1", 1, small("m1"))
    requests = [{"custom_id": "1", "method": "POST", "url": "/v1/chat/completions", "body": {}}]
    create(api, "nightly", "qwen", plural=r.BATCHJOBS, requests=requests)
    ctl = controller(api)
    settle(ctl, lambda: status(api, "nightly", r.BATCHJOBS).get("state") == "running", "running")
    pod = client.CoreV1Api(api).read_namespaced_pod("batch-nightly", r.NAMESPACE)
    assert pod.spec.restart_policy == "OnFailure"  # a failed container only (ADR 0016)
    client.CoreV1Api(api).patch_namespaced_pod_status(
        "batch-nightly", r.NAMESPACE, {"status": {"phase": "Succeeded"}}
    )
    settle(
        ctl, lambda: status(api, "nightly", r.BATCHJOBS).get("state") == "succeeded", "succeeded"
    )
    assert ledger(api) == ()


def test_an_unreachable_machines_service_is_held_and_nothing_moves(fresh_fleet: Any) -> None:
    api = fresh_fleet
    # no KWOK annotation: no kubelet, so no node heartbeat and Pods stay Pending
    client.CoreV1Api(api).create_node({"metadata": {"name": "m9"}})
    publish_report(api, report("m9", 1, small("m9")))
    create(api, "lonely", "qwen")
    ctl = controller(api)
    settle(ctl, lambda: status(api, "lonely").get("state") == "starting", "lonely starting")
    assert read_health(api)["m9"].state is Health.DEGRADED  # one signal quiet: still a candidate

    stale = datetime(2026, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)  # a zero fraction trips the client
    client.CoordinationV1Api(api).delete_namespaced_lease(r.agent_lease_name("m9"), r.NAMESPACE)
    publish_report(api, report("m9", 1, small("m9"), at=stale))
    settle(ctl, lambda: status(api, "lonely").get("state") == "held", "lonely held")
    health = read_health(api)["m9"]
    assert health.state is Health.UNREACHABLE
    st = status(api, "lonely")
    assert st["sentence"].startswith("held since ")
    assert "m9 stopped answering; recovery is off, so it waits for m9" in st["sentence"]
    assert st["record"]["workload"]["held_reason"] == "machine-unreachable-recovery-off"
    assert read_pod(api, "service", "lonely") is not None  # nothing stopped or moved
    assert [x.machine for x in ledger(api)] == ["m9"]


def test_a_held_service_resumes_when_its_machine_answers_again(fresh_fleet: Any) -> None:
    """Held while its machine is unreachable; once the machine's agent reports again, it
    starts again where it was, on its own card (nothing moved meanwhile)."""
    api = fresh_fleet
    client.CoreV1Api(api).create_node({"metadata": {"name": "m8"}})  # no kubelet: no node Lease
    publish_report(api, report("m8", 1, small("m8")))
    create(api, "patient", "qwen")
    ctl = controller(api)
    settle(ctl, lambda: status(api, "patient").get("state") == "starting", "patient starting")
    card = status(api, "patient")["gpuUUID"]

    stale = datetime(2026, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)
    client.CoordinationV1Api(api).delete_namespaced_lease(r.agent_lease_name("m8"), r.NAMESPACE)
    publish_report(api, report("m8", 1, small("m8"), at=stale))
    settle(ctl, lambda: status(api, "patient").get("state") == "held", "patient held")

    publish_report(api, report("m8", 1, small("m8")))  # its agent answers again
    settle(ctl, lambda: status(api, "patient").get("state") == "starting", "patient resumed")
    assert read_health(api)["m8"].state is Health.DEGRADED  # the node Lease is still quiet
    st = status(api, "patient")
    assert st["gpuUUID"] == card and st["machine"] == "m8"
    assert st["record"]["workload"]["held_reason"] is None
    assert [x.machine for x in ledger(api)] == ["m8"]
