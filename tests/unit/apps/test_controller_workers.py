"""Several objects of a batch reconciled at once (the controller's workers): decisions are
still taken in the batch's order, each on every claim decided before it; a quota is still
counted exactly; a failure of one object's steps stops none of the others. Over the
contract-checked fakes, whose store decides one admission at a time as the cluster's does."""

from __future__ import annotations

import json
import time

import pytest
from returns.result import Result

from nodeau.apps.controller.loop import Controller
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.fleet_admission import Decide
from nodeau.domain.organisation import Requester
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.cluster import ClusterError
from nodeau.ports.state import Admission, WorkloadRecord
from nodeau.ports.workload_objects import WorkloadObject
from tests.support.fakes.controller_fleet import SERVICE, fleet, held_cards, state
from tests.support.fakes.fake_cluster import FakeCluster

ALICE = Requester(user="alice")
NAMES = tuple(f"svc-{i}" for i in range(7))


def with_workers(cluster: FakeCluster, workers: int, lines: list[str] | None = None) -> Controller:
    said = lines if lines is not None else []
    return Controller(
        cluster.controller_ports(), clock=cluster.clock, log=said.append, workers=workers
    )


def applied(cluster: FakeCluster, name: str, who: Requester | None = None) -> None:
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name=name, model="qwen", requester=who))


def refusal_code(cluster: FakeCluster, name: str) -> str | None:
    obj = cluster.objects.get(SERVICE, name)
    assert obj is not None, name
    return obj.status["refusal"]["code"] if obj.refused else None


def slower_first(cluster: FakeCluster) -> None:
    """Each object's read takes the longer the earlier it comes in the batch, so that
    without turns the later objects would reach their decision first."""
    get = cluster.objects.get

    def slow(kind: WorkloadKind, name: str) -> WorkloadObject | None:
        time.sleep(0.02 * (len(NAMES) - NAMES.index(name)))
        return get(kind, name)

    cluster.objects.get = slow  # type: ignore[method-assign]


def decided_by(workers: int) -> tuple[list[tuple[str, str]], dict[str, str | None], list[str]]:
    """Seven services on four cards, one pass: the cards held, each refusal, and the order
    the store recorded the admissions in."""
    cluster = fleet("m1", "m2", cards=2)
    for name in reversed(NAMES):  # applied out of order: the batch is sorted
        applied(cluster, name)
    slower_first(cluster)
    with_workers(cluster, workers).resync()
    admitted = [e.workload for e in cluster.store.events() if e.text.startswith("admitted")]
    return held_cards(cluster), {n: refusal_code(cluster, n) for n in NAMES}, admitted


def test_four_workers_decide_a_batch_as_one_worker_does() -> None:
    one, four = decided_by(1), decided_by(4)
    assert four == one
    cards, refusals, admitted = four
    assert [name for name, _card in cards] == list(NAMES[:4])
    assert len({card for _name, card in cards}) == 4
    assert admitted == list(NAMES[:4])  # in the batch's order
    assert refusals == {n: (None if n in NAMES[:4] else "capacity.no-free-card") for n in NAMES}


def test_four_workers_count_a_requesters_quota_exactly() -> None:
    cluster = fleet("m1", cards=4)
    quota = {"everyone": "operator", "quotas": {"users": {"alice": {"max_workloads": 2}}}}
    cluster.organisation.install(json.dumps(quota).encode())
    for name in NAMES[:5]:
        applied(cluster, name, ALICE)
    admit = cluster.store.admit

    def slow(workload: str, decide: Decide) -> Result[Admission, Refusal]:
        outcome = admit(workload, decide)
        time.sleep(0.05)  # the admission is recorded; its spending is not counted yet
        return outcome

    cluster.store.admit = slow  # type: ignore[method-assign]
    with_workers(cluster, 4).resync()
    assert [name for name, _card in held_cards(cluster)] == ["svc-0", "svc-1"]
    assert [refusal_code(cluster, n) for n in NAMES[2:5]] == [
        ReasonCode.WORKLOAD_QUOTA_EXHAUSTED.value
    ] * 3


def test_one_objects_failure_stops_none_of_the_others() -> None:
    cluster = fleet("m1", cards=4)
    for name in NAMES[:4]:
        applied(cluster, name)
    create = cluster.pods.create

    def failing(record: WorkloadRecord, owner: WorkloadObject, *, on_card: bool) -> bool:
        if record.workload.name == "svc-1":
            raise ClusterError("the API server did not answer")
        return create(record, owner, on_card=on_card)

    cluster.pods.create = failing  # type: ignore[method-assign]
    lines: list[str] = []
    with_workers(cluster, 4, lines).resync()
    assert [state(cluster, n) for n in NAMES[:4]] == [
        WorkloadState.STARTING,
        WorkloadState.ADMITTED,
        WorkloadState.STARTING,
        WorkloadState.STARTING,
    ]
    assert "GPUService svc-1: not reconciled this time: the API server did not answer" in lines


def test_a_controller_has_at_least_one_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker, not 0"):
        with_workers(fleet("m1"), 0)


def test_the_whole_batch_is_decided_before_any_server_is_made() -> None:
    cluster = fleet("m1", cards=3)
    for name in NAMES[:3]:
        applied(cluster, name)
    made: list[tuple[str, int]] = []
    create = cluster.pods.create

    def counting(record: WorkloadRecord, owner: WorkloadObject, *, on_card: bool) -> bool:
        made.append((record.workload.name, len(held_cards(cluster))))
        return create(record, owner, on_card=on_card)

    cluster.pods.create = counting  # type: ignore[method-assign]
    with_workers(cluster, 2).resync()
    assert sorted(made) == [("svc-0", 3), ("svc-1", 3), ("svc-2", 3)]
    assert cluster.pods.read(WorkloadKind.SERVICE, "svc-2") is not None
