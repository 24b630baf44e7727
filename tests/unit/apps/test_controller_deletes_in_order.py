"""The controller's deletions, over the contract-checked fakes, where the fakes answered too
readily for a test to see the order of things: a server that takes its time to leave, and a
finished workload deleted afterwards."""

from __future__ import annotations

from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from tests.support.fakes.controller_fleet import LingeringPods, controller, fleet, held_cards, state
from tests.support.fakes.fake_cluster import gpu_uuid

SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH


def test_a_deleted_services_card_is_released_only_once_its_server_is_gone() -> None:
    cluster = fleet("m1")
    pods = cluster.pods = LingeringPods()
    said: list[str] = []
    ctl = controller(cluster, said)
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl.resync()
    pods.run()
    ctl.resync()
    assert state(cluster, "chat") is WorkloadState.SERVING

    cluster.objects.delete(SERVICE, "chat")
    ctl.reconcile_all([(SERVICE, "chat")])
    assert pods.leaving == {(SERVICE, "chat")}
    assert held_cards(cluster) == [("chat", gpu_uuid("m1", 0))]  # the server still holds it
    assert state(cluster, "chat") is WorkloadState.SERVING
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.deleting and obj.guarded

    pods.leave()
    ctl.reconcile_all([(SERVICE, "chat")])
    assert cluster.ledger.read() == Ledger()
    assert state(cluster, "chat") is WorkloadState.STOPPED
    assert cluster.objects.get(SERVICE, "chat") is None
    assert said[-1] == "GPUService chat: deleted; its card is free again"


def test_a_finished_job_deleted_afterwards_releases_nothing_more() -> None:
    cluster = fleet("m1")
    said: list[str] = []
    ctl = controller(cluster, said)
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    cluster.pods.end(BATCH, "nightly", ok=True)
    ctl.resync()
    assert state(cluster, "nightly") is WorkloadState.SUCCEEDED
    events = cluster.events.reasons("nightly")
    cluster.pods.delete(BATCH, "nightly")  # its Pod gone with the job's end

    cluster.objects.delete(BATCH, "nightly")
    before = len(said)
    ctl.reconcile_all([(BATCH, "nightly")])
    assert cluster.objects.get(BATCH, "nightly") is None
    assert state(cluster, "nightly") is WorkloadState.SUCCEEDED  # its end is kept
    assert cluster.events.reasons("nightly") == events
    assert said[before:] == []
