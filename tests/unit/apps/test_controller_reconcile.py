"""The controller's use cases over the contract-checked fakes: decide, start, serve, finish.

Each test drives ``Controller.resync`` (the pass ``--once`` runs) against a
``FakeCluster``; the fake's servers run only when a test says so
(``pods.run``, ``pods.end``), standing for the machine. Assertions are on what
the cluster holds afterwards: records, ledger, objects, servers, events.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attrs import evolve

from nodeau.apps.controller.loop import Controller, ControllerPorts
from nodeau.domain.health import Health, MachineHealth, Signal
from nodeau.domain.lifecycle import ServerPhase
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import HeldReason, WorkloadKind, WorkloadState
from nodeau.ports.cluster import Condition, NoAnswer, ServerPod, WorkloadAsk
from nodeau.ports.state import WorkloadRecord
from tests.support.fake_cluster import (
    FakeCluster,
    FakeServerPods,
    gpu_uuid,
    machine_report,
    verified,
)
from tests.support.fakes import StepClock
from tests.unit.domain.test_memory import TINY

START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
S = WorkloadState
SMALL, HUGE = "ab" * 32, "cd" * 32
SUMMARY = ModelSummary(
    architecture=TINY,
    quantisation="Q8_0",
    tensor_count=21,
    tensor_bytes=100,
    has_tokenizer=True,
    has_chat_template=True,
)
ENDPOINT = "http://10.0.0.7:8080/v1"


def fleet(*machines: str, cards: int = 1) -> FakeCluster:
    """Machines that each report ``cards`` 24 GiB cards and a verified 4 GiB "qwen" and a
    40 GiB "giant" (which fits no card)."""
    cluster = FakeCluster(StepClock(start=START))
    for m in machines:
        cluster.add_node(m)
        small = verified(m, SUMMARY, sha=SMALL, name="qwen", gib=4)
        huge = verified(m, SUMMARY, sha=HUGE, name="giant", gib=40)
        cluster.reports.publish(machine_report(m, cards, small, huge, at=START))
    return cluster


def controller(cluster: FakeCluster, lines: list[str] | None = None) -> Controller:
    ports = ControllerPorts(
        store=cluster.store,
        objects=cluster.objects,
        pods=cluster.pods,
        reports=cluster.reports,
        marks=cluster.marks,
        health=cluster.health,
        events=cluster.events,
        watch=cluster.watch,
    )
    said = lines if lines is not None else []
    return Controller(ports, clock=cluster.clock, log=said.append)


def record(cluster: FakeCluster, name: str) -> WorkloadRecord:
    found = cluster.store.snapshot().named(name)
    assert found is not None, name
    return found


def state(cluster: FakeCluster, name: str) -> WorkloadState:
    return record(cluster, name).workload.state


def held_cards(cluster: FakeCluster) -> list[tuple[str, str]]:
    return [(x.workload, x.gpu_uuid) for x in cluster.ledger.read().reservations]


def test_a_service_is_admitted_its_server_made_then_it_starts_and_serves() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)

    ctl.resync()  # decided, guarded, its server made: starting
    assert state(cluster, "chat") is S.STARTING
    assert held_cards(cluster) == [("chat", gpu_uuid("m1", 0))]
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.guarded and obj.endpoint == ""
    assert cluster.pods.pods == {
        (SERVICE, "chat"): ServerPod(
            workload="chat",
            kind=SERVICE,
            machine="m1",
            gpu_uuid=gpu_uuid("m1", 0),
            phase=ServerPhase.STARTING,
            endpoint=None,
        )
    }
    assert cluster.events.reasons("chat") == ["Placed", "Started"]

    ctl.resync()  # nothing answers yet: nothing changes
    assert state(cluster, "chat") is S.STARTING

    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "chat") is S.SERVING
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.endpoint == ENDPOINT
    assert obj.condition("Ready") == Condition(
        type="Ready",
        ok=True,
        reason="Serving",
        message=f"serving at {ENDPOINT} on m1 (GPU-m1-0…)",
    )
    assert cluster.events.reasons("chat") == ["Placed", "Started", "Serving"]

    ctl.resync()  # settled: nothing more is written or said
    assert cluster.events.reasons("chat") == ["Placed", "Started", "Serving"]


def test_a_stopped_endpoint_is_taken_off_and_the_model_stays_loaded() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    cluster.objects.want_endpoint(SERVICE, "chat", serving=False)
    ctl.resync()
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.endpoint == ""
    ready = obj.condition("Ready")
    assert ready is not None and (ready.ok, ready.reason) == (False, "EndpointStopped")
    assert state(cluster, "chat") is S.SERVING
    assert held_cards(cluster) == [("chat", gpu_uuid("m1", 0))]


def test_a_refusal_is_shown_and_nothing_is_made() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="big", model="giant"))
    ctl = controller(cluster)
    ctl.resync()
    obj = cluster.objects.get(SERVICE, "big")
    assert obj is not None and obj.refused and obj.record is None
    assert obj.status["refusal"]["code"] == "capacity.no-card-large-enough"
    assert cluster.store.snapshot().workloads == ()
    assert cluster.ledger.read() == Ledger()
    assert cluster.pods.pods == {}
    ctl.resync()  # a refused object stays refused: no retry
    assert cluster.events.reasons("big") == ["Refused"]


def test_a_model_no_machine_holds_is_refused() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="x", model="nowhere"))
    controller(cluster).resync()
    obj = cluster.objects.get(SERVICE, "x")
    assert obj is not None and obj.status["refusal"]["code"] == "capacity.no-verified-copy"


def test_a_deleted_service_loses_its_server_then_its_card_then_its_object() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "chat") is S.SERVING

    cluster.objects.delete(SERVICE, "chat")
    deleting = cluster.objects.get(SERVICE, "chat")
    assert deleting is not None and deleting.deleting  # guarded: it waits for the release
    ctl.reconcile_all([(SERVICE, "chat")])
    assert cluster.pods.pods == {}
    assert state(cluster, "chat") is S.STOPPED
    assert cluster.ledger.read() == Ledger()
    assert cluster.objects.get(SERVICE, "chat") is None


def test_a_batch_jobs_server_that_ended_frees_its_card() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    assert state(cluster, "nightly") is S.STARTING
    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "nightly") is S.RUNNING
    assert cluster.events.reasons("nightly") == ["Placed", "Started", "Running"]
    cluster.pods.end(BATCH, "nightly", ok=True)
    ctl.resync()
    assert state(cluster, "nightly") is S.SUCCEEDED
    assert cluster.ledger.read() == Ledger()
    # the card is free again: a second job takes it
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="again", model="qwen"))
    ctl.resync()
    assert held_cards(cluster) == [("again", gpu_uuid("m1", 0))]


def test_a_batch_job_whose_server_failed_is_failed_and_frees_its_card() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.end(BATCH, "nightly", ok=False)
    ctl.resync()
    assert state(cluster, "nightly") is S.FAILED
    assert cluster.ledger.read() == Ledger()


def test_a_services_server_that_exited_is_noticed_the_service_fails_and_its_card_frees() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    cluster.pods.end(SERVICE, "chat", ok=False)
    ctl.resync()
    assert state(cluster, "chat") is S.FAILED
    assert cluster.ledger.read() == Ledger()


def test_a_held_workload_gets_no_server() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.delete(SERVICE, "chat")  # the machine went, and its server with it
    since = START
    cluster.store.update("chat", lambda r: held(r, since))  # as health holds it
    unreachable = MachineHealth(
        state=Health.UNREACHABLE,
        since=since,
        quiet=frozenset({Signal.NODE_HEARTBEAT, Signal.AGENT_REPORT}),
        sentence="m1 stopped answering",
    )
    cluster.health.write({"m1": unreachable})
    ctl.reconcile_all([(SERVICE, "chat")])
    assert state(cluster, "chat") is S.HELD
    assert cluster.pods.pods == {}


def held(r: WorkloadRecord, since: datetime) -> WorkloadRecord:
    w = evolve(
        r.workload,
        state=S.HELD,
        since=since,
        held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
    )
    return evolve(r, workload=w)


class Unreachable(FakeServerPods):
    """Servers on a machine whose API calls fail, for one workload."""

    def read(self, kind: WorkloadKind, workload: str) -> ServerPod | None:
        if workload == "cut-off":
            raise NoAnswer("read Pod service-cut-off", "connection refused")
        return super().read(kind, workload)


class Broken(FakeServerPods):
    def read(self, kind: WorkloadKind, workload: str) -> ServerPod | None:
        raise ValueError("an invariant broke")


def test_an_expected_failure_is_one_line_and_the_others_go_on() -> None:
    cluster = fleet("m1", cards=2)
    cluster.pods = Unreachable()
    for name in ("cut-off", "fine"):
        cluster.objects.create(WorkloadAsk(kind=SERVICE, name=name, model="qwen"))
    lines: list[str] = []
    controller(cluster, lines).resync()
    assert state(cluster, "fine") is S.STARTING
    assert state(cluster, "cut-off") is S.ADMITTED
    assert (
        "GPUService cut-off: not reconciled this time: cannot read Pod service-cut-off: "
        "the cluster does not answer (connection refused)"
    ) in lines


def test_a_broken_invariant_is_not_swallowed() -> None:
    cluster = fleet("m1")
    cluster.pods = Broken()
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    with pytest.raises(ValueError, match="an invariant broke"):
        controller(cluster).resync()
