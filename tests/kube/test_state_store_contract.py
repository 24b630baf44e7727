"""The StateStore contract suite, run again against ``KubeStateStore`` on a real API server.

Every ``store`` test of tests/support/contracts/state_store_contract.py is collected here
unchanged, with the cluster's ``store`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from attrs import evolve
from kubernetes import client
from returns.result import Result

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.state import Admission, Snapshot, UnknownWorkload
from nodeau.ports.workload_objects import Condition
from tests.support.builders.admissions import decider
from tests.support.clock import ticking
from tests.support.contracts import state_store_contract as contract
from tests.support.contracts import suite_of

# Rerun here rather than as a third parameter of tests/contract/test_state_store.py: the
# cluster's fixtures live in tests/kube/conftest.py.
CONTRACT = suite_of(contract, "store")
globals().update(CONTRACT)


@pytest.fixture
def store(fresh_fleet: client.ApiClient) -> KubeStateStore:
    return KubeStateStore(fresh_fleet, clock=ticking(contract.START), identity="contract")


def test_every_contract_test_runs_here() -> None:
    assert len(CONTRACT) >= 12
    assert all(globals()[name] is test for name, test in CONTRACT.items())


# The cluster only: what a person sees with kubectl


def custom(api: client.ApiClient, kind: WorkloadKind, name: str) -> dict[str, Any]:
    plural = r.GPUSERVICES if kind is WorkloadKind.SERVICE else r.BATCHJOBS
    objects: Any = client.CustomObjectsApi(api)
    found: dict[str, Any] = objects.get_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, plural, name
    )
    return found


def kube_events(api: client.ApiClient, name: str) -> list[Any]:
    listed = client.CoreV1Api(api).list_namespaced_event(
        r.NAMESPACE, field_selector=f"involvedObject.name={name}"
    )
    return sorted(listed.items, key=lambda e: int(e.metadata.resource_version))


def as_batch(
    decide: Callable[[Snapshot], Result[Admission, Refusal]],
) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    def batch(a: Admission) -> Admission:
        workload = evolve(a.record.workload, kind=WorkloadKind.BATCH)
        return evolve(a, record=evolve(a.record, workload=workload))

    return lambda snapshot: decide(snapshot).map(batch)


def test_an_admission_creates_the_object_and_says_what_was_decided(
    fresh_fleet: client.ApiClient,
) -> None:
    clock = ticking(contract.START)
    store = KubeStateStore(fresh_fleet, clock=clock, identity="controller-a")
    chat = store.admit("chat", decider("chat", contract.TWO_CARDS, contract.NOW)).unwrap()
    job = store.admit("job", as_batch(decider("job", contract.TWO_CARDS, contract.NOW))).unwrap()
    service = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")
    assert service["metadata"]["finalizers"] == [r.FINALIZER]
    w, config = chat.record.workload, chat.record.config
    assert service["spec"] == {
        "model": w.model,
        "task": config.task.value,
        "contextTokens": config.context_tokens,
        "recovery": w.recovery_mode.value,
        "recoveryAfterSeconds": int(w.recovery_after.total_seconds()),
        "endpoint": "serving",  # the CRD's default
    }
    status = service["status"]
    reservation = chat.placement.reservation
    assert {k: status[k] for k in ("state", "machine", "gpuUUID", "reservedBytes")} == {
        "state": "admitted",
        "machine": reservation.machine,
        "gpuUUID": reservation.gpu_uuid,
        "reservedBytes": reservation.bytes,
    }
    # the store's clock reads START (10:00:00 UTC) when it records; the card's UUID is cut short
    assert status["sentence"] == (
        "admitted on m1 (GPU-0000…) since 10:00:00 (0s); "
        "it starts once its image and model files are ready"
    )
    assert (status["source"], status["decidedBy"]) == ("estimated", "controller-a")
    assert datetime.fromisoformat(status["decidedAt"]) == chat.decided_at
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {t: (c["status"], c["reason"]) for t, c in conditions.items()} == {
        "Admitted": ("True", "Admitted"),
        "Placed": ("True", "Placed"),
    }
    assert conditions["Placed"]["message"] == chat.placement.why
    assert conditions["Admitted"]["message"].startswith(f"admitted onto {reservation.gpu_uuid}")
    batch = custom(fresh_fleet, WorkloadKind.BATCH, "job")
    assert batch["spec"] == {"model": w.model, "task": "chat", "contextTokens": 4096}
    assert batch["status"]["gpuUUID"] == job.placement.gpu_uuid
    [admitted] = kube_events(fresh_fleet, "chat")
    assert (admitted.reason, admitted.type, admitted.involved_object.kind) == (
        "Admitted",
        "Normal",
        r.GPUSERVICE_KIND,
    )
    assert admitted.involved_object.uid == service["metadata"]["uid"]
    assert admitted.source.component == r.CONTROLLER_COMPONENT
    assert store.admission("job") == job


def test_an_object_a_person_applied_is_admitted_in_place(fresh_fleet: client.ApiClient) -> None:
    objects: Any = client.CustomObjectsApi(fresh_fleet)
    applied = objects.create_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES,
        {"apiVersion": r.API_VERSION, "kind": r.GPUSERVICE_KIND,
         "metadata": {"name": "chat", "labels": {"team": "search"}},
         "spec": {"model": "qwen-race", "contextTokens": 2048}},
    )  # fmt: skip
    store = KubeStateStore(fresh_fleet, clock=ticking(), identity="c")
    assert store.snapshot().workloads == ()  # no record yet: nothing decided
    chat = store.admit("chat", decider("chat", contract.ONE_CARD, contract.NOW)).unwrap()
    after = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")
    assert after["metadata"]["uid"] == applied["metadata"]["uid"]
    assert after["metadata"]["labels"] == {"team": "search"}
    assert after["spec"]["contextTokens"] == 2048  # a person's spec is theirs
    assert store.snapshot().workloads == (chat.record,)


def test_a_refusal_is_recorded_on_the_object_and_creates_nothing_else(
    fresh_fleet: client.ApiClient,
) -> None:
    store = KubeStateStore(fresh_fleet, clock=ticking(), identity="c")
    objects = KubeWorkloadObjects(fresh_fleet, identity="c")
    refusal = Refusal.of(ReasonCode.NO_FREE_CARD, "every card that fits is held")
    at = datetime(2026, 3, 1, 9, 30, 15, tzinfo=UTC)
    with pytest.raises(UnknownWorkload, match=r"^no workload called chat in "):
        objects.record_refusal(WorkloadKind.SERVICE, "chat", refusal, at)
    client.CustomObjectsApi(fresh_fleet).create_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES,
        {"apiVersion": r.API_VERSION, "kind": r.GPUSERVICE_KIND, "metadata": {"name": "chat"},
         "spec": {"model": "qwen-race"}},
    )  # fmt: skip
    objects.record_refusal(WorkloadKind.SERVICE, "chat", refusal, at)
    status = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")["status"]
    assert status["state"] == "refused"
    assert status["refusal"] == {
        "kind": "capacity",
        "code": "capacity.no-free-card",
        "message": "every card that fits is held",
    }
    [admitted] = status["conditions"]
    assert (admitted["type"], admitted["status"], admitted["reason"]) == (
        "Admitted",
        "False",
        "Capacity",
    )
    assert admitted["message"] == "capacity.no-free-card: every card that fits is held"
    assert admitted["lastTransitionTime"] == "2026-03-01T09:30:15Z"
    [said] = kube_events(fresh_fleet, "chat")
    assert (said.type, said.reason, said.message) == ("Warning", "Refused", admitted["message"])
    assert store.snapshot() == Snapshot(ledger=Ledger(), workloads=())
    # admitted later: the refusal goes, the condition flips
    store.admit("chat", decider("chat", contract.ONE_CARD, contract.NOW)).unwrap()
    status = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")["status"]
    assert "refusal" not in status
    assert {c["type"]: c["status"] for c in status["conditions"]}["Admitted"] == "True"


def test_set_status_merges_fields_and_moves_a_condition_only_when_it_flips(
    fresh_fleet: client.ApiClient,
) -> None:
    clock = ticking(datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
    store = KubeStateStore(fresh_fleet, clock=clock, identity="c")
    objects = KubeWorkloadObjects(fresh_fleet, identity="c")
    chat = store.admit("chat", decider("chat", contract.ONE_CARD, contract.NOW)).unwrap()
    objects.set_status(WorkloadKind.SERVICE, "chat", {"endpoint": "10.0.0.7:8080"},
                       [ready_is(False, "Starting", "loading the model")], clock())  # fmt: skip
    first = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")["status"]
    objects.set_status(WorkloadKind.SERVICE, "chat", {"sentence": "still loading"},
                       [ready_is(False, "Loading", "half way")], clock())  # fmt: skip
    second = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")["status"]
    objects.set_status(WorkloadKind.SERVICE, "chat", {"endpoint": None},
                       [ready_is(True, "Serving", "answering")], clock())  # fmt: skip
    third = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")["status"]

    def ready(status: dict[str, Any]) -> dict[str, Any]:
        return next(c for c in status["conditions"] if c["type"] == "Ready")

    assert (first["endpoint"], second["endpoint"], second["sentence"]) == (
        "10.0.0.7:8080",
        "10.0.0.7:8080",
        "still loading",
    )
    assert "endpoint" not in third
    assert ready(second)["lastTransitionTime"] == ready(first)["lastTransitionTime"]
    assert ready(second)["reason"] == "Loading"
    assert ready(third)["lastTransitionTime"] > ready(second)["lastTransitionTime"]
    assert [c["type"] for c in third["conditions"]] == ["Admitted", "Placed", "Ready"]
    assert store.admission("chat") == chat  # the decision is untouched
    with pytest.raises(ValueError, match="may not write record"):
        objects.set_status(WorkloadKind.SERVICE, "chat", {"record": {}}, (), clock())
    with pytest.raises(UnknownWorkload):
        objects.set_status(WorkloadKind.BATCH, "chat", {"state": "running"}, (), clock())


def ready_is(ok: bool, reason: str, message: str) -> Condition:
    return Condition(type="Ready", ok=ok, reason=reason, message=message)


def test_a_release_says_the_card_is_free_on_the_object(fresh_fleet: client.ApiClient) -> None:
    store = KubeStateStore(fresh_fleet, clock=ticking(), identity="c")
    store.admit("chat", decider("chat", contract.ONE_CARD, contract.NOW)).unwrap()
    store.release("chat", contract.in_state(WorkloadState.STOPPED))
    status = custom(fresh_fleet, WorkloadKind.SERVICE, "chat")["status"]
    assert (status["state"], status["reservedBytes"]) == ("stopped", 0)
    placed = next(c for c in status["conditions"] if c["type"] == "Placed")
    assert (placed["status"], placed["reason"]) == ("False", "Released")
    assert [e.reason for e in kube_events(fresh_fleet, "chat")] == ["Admitted", "Released"]
