"""The organisation's quotas, held by the fleet's controller itself (contract-checked fakes).

A GPUService applied by hand is refused once its requester's quota is spent, by earlier passes or
the same batch; a finished workload spends nothing; with no policy nothing is counted.
"""

from __future__ import annotations

import json

from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.lifecycle import with_state
from nodeau.domain.organisation import Requester
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.workloads import WorkloadState
from tests.support.fakes.controller_fleet import (
    SERVICE,
    START,
    controller,
    fleet,
    held_cards,
    state,
)
from tests.support.fakes.fake_cluster import FakeCluster

ALICE = Requester(user="alice", groups=frozenset({"research"}))
QUOTA = {"everyone": "operator", "quotas": {"users": {"alice": {"max_workloads": 1}}}}


def applied(cluster: FakeCluster, name: str, who: Requester | None = ALICE) -> None:
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name=name, model="qwen", requester=who))


def refusal_of(cluster: FakeCluster, name: str) -> tuple[str, str]:
    obj = cluster.objects.get(SERVICE, name)
    assert obj is not None and obj.refused, name
    refusal = obj.status["refusal"]
    return refusal["code"], refusal["message"]


def test_a_service_over_its_requesters_quota_is_refused_by_the_controller() -> None:
    cluster = fleet("m1", cards=2)
    cluster.organisation.install(json.dumps(QUOTA).encode())
    applied(cluster, "chat")
    ctl = controller(cluster)
    ctl.resync()
    assert state(cluster, "chat") is WorkloadState.STARTING

    applied(cluster, "chat-2")  # a later pass: its spending is read from the objects
    ctl.resync()
    assert refusal_of(cluster, "chat-2") == (
        ReasonCode.WORKLOAD_QUOTA_EXHAUSTED.value,
        "User alice runs 1 of its 1 workloads; stopping a workload frees quota.",
    )
    assert [name for name, _card in held_cards(cluster)] == ["chat"]


def test_two_services_of_one_requester_in_one_batch_count_against_each_other() -> None:
    cluster = fleet("m1", cards=2)
    cluster.organisation.install(json.dumps(QUOTA).encode())
    applied(cluster, "chat-a")
    applied(cluster, "chat-b")
    controller(cluster).resync()  # one batch: chat-a decided first (name order)
    assert state(cluster, "chat-a") is WorkloadState.STARTING
    assert refusal_of(cluster, "chat-b")[0] == ReasonCode.WORKLOAD_QUOTA_EXHAUSTED.value
    assert [name for name, _card in held_cards(cluster)] == ["chat-a"]


def test_another_requester_and_a_finished_workload_spend_nothing_of_the_quota() -> None:
    cluster = fleet("m1", cards=3)
    cluster.organisation.install(json.dumps(QUOTA).encode())
    applied(cluster, "bobs", Requester(user="bob"))
    applied(cluster, "chat")
    ctl = controller(cluster)
    ctl.resync()
    assert sorted(name for name, _card in held_cards(cluster)) == ["bobs", "chat"]
    cluster.store.release("chat", lambda r: with_state(r, WorkloadState.STOPPED, START))
    applied(cluster, "chat-2")
    ctl.resync()
    assert state(cluster, "chat-2") is WorkloadState.STARTING


def test_with_no_policy_nothing_is_counted_and_no_object_is_listed_for_it() -> None:
    cluster = fleet("m1", cards=2)
    applied(cluster, "chat", None)
    applied(cluster, "chat-2", None)
    ctl = controller(cluster)
    listed: list[int] = []
    real = cluster.objects.list_all

    def counting() -> tuple[object, ...]:
        listed.append(1)
        return real()

    cluster.objects.list_all = counting  # type: ignore[method-assign]
    ctl.reconcile_all([(SERVICE, "chat"), (SERVICE, "chat-2")])
    assert sorted(name for name, _card in held_cards(cluster)) == ["chat", "chat-2"]
    assert listed == []
