"""What the controller's reconcile says and shows, word for word, over the contract-checked
fakes: each Event's message and time, each log line, the Ready condition of an endpoint
taken off from the start or of a machine that stops answering before its workload serves,
and the cases the other reconcile tests do not stage (a spec that no longer reads, a server
whose object is gone, a machine not assessed yet, a server's owner)."""

from __future__ import annotations

import json
from datetime import timedelta

from attrs import evolve

from nodeau.apps.controller.loop import Controller
from nodeau.apps.controller.reading import FleetInputs, FleetReading
from nodeau.apps.controller.reconcile import Reconciler
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.health import Health
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts
from nodeau.domain.memory import GIB
from nodeau.domain.organisation import Requester
from nodeau.domain.qualification import EvidenceBook
from nodeau.domain.workloads import RecoveryMode, ServerExit, WorkloadKind, WorkloadState
from nodeau.ports.state import WorkloadRecord
from nodeau.ports.workload_objects import Condition, WorkloadObject
from tests.support.clock import Clock
from tests.support.fakes.controller_fleet import (
    ENDED,
    ENDPOINT,
    START,
    Measured,
    UnreadableObjects,
    controller,
    fleet,
    held,
    held_cards,
    record,
    serving_chat,
    state,
    tick,
)
from tests.support.fakes.fake_cluster import FakeCluster, FakeServerPods, FakeWorkloadObjects
from tests.support.fakes.fleet_stories import Story

SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
S = WorkloadState
CARD = "GPU-m1-00-0000-sim"
RESERVED = 6 * GIB  # the measured peak, not the 5.50 GiB estimate


def said(cluster: FakeCluster, name: str) -> list[tuple[str, str]]:
    return [(s.reason, s.message) for s in cluster.events.said if s.workload == name]


def test_a_services_placement_start_and_endpoint_are_said_in_these_words_at_that_time() -> None:
    clock = Clock(START)
    cluster = fleet("m1", clock=clock)
    tick(cluster, clock, ENDED)
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    lines: list[str] = []
    ctl = controller(cluster, lines)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    why = (
        "pack: m1 already holds 0 of its 1 cards, the fullest machine with a card that "
        "fits; GPU-m1-00-0000-sim (24.00 GiB) is the smallest free card there that takes "
        "5.50 GiB; 0 other candidate(s) ranked below"
    )
    # the decision's one Event is the store's, with where it reserved and why that card
    [admitted] = cluster.store.events("chat")
    assert admitted.text == f"admitted onto {CARD} on m1, reserving 5.50 GiB; placed by {why}"
    assert f"GPUService chat: placed: {why}" in lines
    assert said(cluster, "chat") == [
        ("Started", "model server created on m1 (GPU-m1-0…)"),
        ("Serving", f"serving at {ENDPOINT} on m1 (GPU-m1-0…)"),
    ]
    assert {s.at for s in cluster.events.said} == {ENDED}
    assert "GPUService chat: Started: model server created on m1 (GPU-m1-0…)" in lines


def test_a_refusal_is_logged_with_its_code_and_sentence() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="big", model="giant"))
    lines: list[str] = []
    controller(cluster, lines).resync()
    refused = [line for line in lines if line.startswith("GPUService big: refused: ")]
    assert len(refused) == 1
    assert refused[0].startswith("GPUService big: refused: capacity.no-card-large-enough: ")


def test_an_undecided_object_whose_spec_does_not_read_is_logged_and_left_undecided() -> None:
    cluster = fleet("m1")
    objects = cluster.objects = UnreadableObjects(cluster)
    objects.unreadable.add("chat")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    lines: list[str] = []
    controller(cluster, lines).resync()
    assert "GPUService chat: its spec does not read; nothing is decided" in lines
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and not obj.decided and cluster.pods.pods == {}


def test_a_serving_service_whose_spec_stops_reading_serves_on_unchanged() -> None:
    cluster = fleet("m1")
    objects = cluster.objects = UnreadableObjects(cluster)
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    before = record(cluster, "chat")
    objects.unreadable.add("chat")
    ctl.resync()
    assert record(cluster, "chat") == before
    assert state(cluster, "chat") is S.SERVING


def test_a_recovery_chosen_by_a_person_is_said_in_these_words() -> None:
    cluster, _, ctl = serving_chat()
    cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.AUTOMATIC, timedelta(minutes=5))
    ctl.resync()
    w = record(cluster, "chat").workload
    assert (w.recovery_mode, w.recovery_after) == (RecoveryMode.AUTOMATIC, timedelta(minutes=5))
    assert said(cluster, "chat")[-1] == (
        "RecoveryChosen",
        "recovery automatic after 5m; nothing restarts",
    )
    cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.NEVER, timedelta(minutes=5))
    ctl.resync()
    assert said(cluster, "chat")[-1] == ("RecoveryChosen", "recovery never; nothing restarts")


def test_an_endpoint_stopped_from_the_start_is_off_once_the_model_is_loaded() -> None:
    cluster = fleet("m1")
    ask = WorkloadAsk(kind=SERVICE, name="chat", model="qwen", endpoint_stopped=True)
    cluster.objects.create(ask)
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    obj = cluster.objects.get(SERVICE, "chat")
    message = "the endpoint is off; the model stays loaded on m1"
    assert obj is not None and obj.endpoint == ""
    assert obj.condition("Ready") == Condition(
        type="Ready", ok=False, reason="EndpointStopped", message=message
    )
    assert said(cluster, "chat")[-1] == ("Stopped", message)


def test_a_ready_server_without_an_address_shows_no_endpoint() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    key = (SERVICE, "chat")
    cluster.pods.pods[key] = evolve(cluster.pods.pods[key], phase=ServerPhase.READY, endpoint=None)
    ctl.resync()
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.endpoint == ""
    assert obj.status.get("endpoint") == ""


def test_a_finished_workloads_release_is_logged_with_why_it_finished() -> None:
    cluster = fleet("m1", "m2", clock=Clock(START))
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    lines: list[str] = []
    ctl = controller(cluster, lines)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    assert said(cluster, "nightly")[-1][0] == "Running"
    machine = record(cluster, "nightly").workload.machine
    short = f"GPU-{machine}-0…"
    assert said(cluster, "nightly")[-1] == ("Running", f"running on {machine} ({short})")
    served_on = record(cluster, "chat").workload.machine
    cluster.pods.end(SERVICE, "chat", ok=False)
    cluster.pods.end(BATCH, "nightly", ok=True)
    ctl.resync()
    assert (
        f"GPUService chat: failed (its model server exited); "
        f"GPU-{served_on}-00-0000-sim on {served_on} is free again"
    ) in lines
    assert (
        f"BatchJob nightly: succeeded (it ended); GPU-{machine}-00-0000-sim on {machine} "
        "is free again"
    ) in lines


def test_a_restart_is_logged_and_said_at_its_time_and_a_service_back_up_is_not_running() -> None:
    cluster, clock, ctl = serving_chat()
    lines: list[str] = []
    ctl = controller(cluster, lines)
    killed = ServerExit.killed(9, "SIGKILL", ENDED)
    cluster.pods.report(SERVICE, "chat", ServerRestarts(last_exit=killed, down=True))
    tick(cluster, clock, ENDED + timedelta(seconds=2))
    ctl.resync()
    words = "its model server was killed by signal 9 (SIGKILL) at 11:00:05"
    assert f"GPUService chat: Restarting: {words}; restart 1, next attempt at 11:00:15" in lines
    restarting = cluster.events.said[-1]
    assert (restarting.reason, restarting.at) == ("Restarting", ENDED + timedelta(seconds=2))

    up = ServerRestarts(count=1, last_exit=killed, ran_for=timedelta(seconds=8))
    cluster.pods.report(SERVICE, "chat", up, ready=True)
    back = ENDED + timedelta(seconds=30)
    tick(cluster, clock, back)
    ctl.resync()
    w = record(cluster, "chat").workload
    assert (w.state, w.since) == (S.SERVING, back)
    assert [reason for reason, _ in said(cluster, "chat")] == [
        "Started",
        "Serving",
        "Restarting",
        "Serving",
    ]


def test_a_batch_job_back_up_after_a_restart_says_it_runs_in_these_words() -> None:
    clock = Clock(START)
    cluster = fleet("m1", clock=clock)
    tick(cluster, clock, ENDED)
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    oom = ServerExit.killed(9, "OOMKilled", ENDED)
    cluster.pods.report(BATCH, "nightly", ServerRestarts(last_exit=oom, down=True))
    ctl.resync()
    up = ServerRestarts(count=1, last_exit=oom, running_since=ENDED)
    cluster.pods.report(BATCH, "nightly", up, ready=True)
    ctl.resync()
    assert said(cluster, "nightly")[-1] == ("Running", "running on m1 (GPU-m1-0…)")


def test_a_server_whose_object_is_gone_is_deleted_and_logged() -> None:
    cluster, _, _ = serving_chat()
    lines: list[str] = []
    ctl = controller(cluster, lines)
    del cluster.objects.stored[SERVICE, "chat"]  # unguarded and removed by hand
    ctl.reconcile_all([(SERVICE, "chat")])
    assert cluster.pods.pods == {}
    assert "GPUService chat is gone; its model server is deleted" in lines


def test_a_starting_service_whose_machine_stops_answering_is_fenced_in_status() -> None:
    story = Story("m1")
    story.cluster.objects.create(
        WorkloadAsk(
            kind=SERVICE,
            name="chat",
            model="qwen",
            recovery=RecoveryMode.AUTOMATIC,
            recovery_after=timedelta(hours=1),
        )
    )
    story.tick()
    assert state(story.cluster, "chat") is S.STARTING
    story.off_the_network("m1")
    story.run_for(60)
    assert story.health("m1") is Health.UNREACHABLE
    obj = story.cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.endpoint == ""
    ready = obj.condition("Ready")
    assert ready is not None
    assert (ready.ok, ready.reason) == (False, "MachineUnreachable")
    assert ready.message.endswith("; no request is routed to it")
    assert "Fenced" not in [reason for reason, _ in said(story.cluster, "chat")]


class OwnedPods(FakeServerPods):
    """Servers that remember the object each was made for (a Pod's owner reference)."""

    def __init__(self) -> None:
        super().__init__()
        self.owners: dict[str, str] = {}

    def create(self, record: WorkloadRecord, owner: WorkloadObject, *, on_card: bool) -> bool:
        self.owners[record.workload.name] = owner.uid
        return super().create(record, owner, on_card=on_card)


def test_a_server_is_made_for_its_own_object() -> None:
    cluster = fleet("m1")
    pods = cluster.pods = OwnedPods()
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    controller(cluster).resync()
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and pods.owners == {"chat": obj.uid}


def test_a_workload_on_a_machine_not_assessed_yet_is_driven_by_its_server_alone() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    controller(cluster).resync()
    cluster.pods.run()
    reconciler = Reconciler(
        store=cluster.store,
        objects=cluster.objects,
        pods=cluster.pods,
        events=cluster.events,
        clock=cluster.clock,
        log=lambda _: None,
    )

    def no_fleet() -> FleetInputs:
        raise AssertionError("a decided workload needs no fleet reading")

    reconciler.reconcile(SERVICE, "chat", FleetReading(no_fleet, dict))
    assert state(cluster, "chat") is S.SERVING


class Kept:
    """The fleet's evidence (none kept), counting its reads."""

    def __init__(self) -> None:
        self.reads = 0

    def evidence(self) -> EvidenceBook:
        self.reads += 1
        return EvidenceBook.empty()


def test_what_counts_as_proved_is_not_read_for_a_batch_job_or_a_service_served_unproved() -> None:
    cluster = fleet("m1", "m2", clock=Clock(START))
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="job", model="qwen"))
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="anyway", model="qwen", unproved=True))
    kept = Kept()
    ports = evolve(cluster.controller_ports(), evidence=kept)
    Controller(ports, clock=cluster.clock, log=lambda _: None).resync()
    assert kept.reads == 0
    assert {state(cluster, "job"), state(cluster, "anyway")} == {S.STARTING}


def test_the_organisations_limits_decide_where_a_service_is_placed() -> None:
    cluster = fleet("m1", "m2", clock=Clock(START))
    limits = {"everyone": "admin", "limits": {"allowed_machines": ["m2"]}}
    cluster.organisation.install(json.dumps(limits).encode())
    alice = Requester(user="alice")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen", requester=alice))
    controller(cluster).resync()
    assert record(cluster, "chat").workload.machine == "m2"


def test_a_service_is_admitted_on_the_peak_measured_on_the_fleets_cards() -> None:
    cluster = fleet("m1", clock=Clock(START))
    ports = evolve(cluster.controller_ports(), measured=Measured())
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    Controller(ports, clock=cluster.clock, log=lambda _: None).resync()
    assert [r.bytes for r in cluster.ledger.read().reservations] == [RESERVED]


def test_a_held_workload_gets_no_server_even_while_its_machine_answers() -> None:
    cluster = fleet("m1", clock=Clock(START))
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.delete(SERVICE, "chat")
    cluster.store.update("chat", lambda r: held(r, START))  # recovery's to decide
    ctl.reconcile_all([(SERVICE, "chat")])
    assert cluster.pods.pods == {}
    assert state(cluster, "chat") is S.HELD


class LostObjects(FakeWorkloadObjects):
    """The fake's objects, of which those in ``gone`` vanish once decided (removed by hand,
    finalizer and all) and those in ``unrecorded`` show no record (lost from the ledger)."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(cluster)
        self.gone: set[str] = set()
        self.unrecorded: set[str] = set()

    def get(self, kind: WorkloadKind, name: str) -> WorkloadObject | None:
        found = super().get(kind, name)
        if found is not None and found.decided and name in self.gone:
            return None
        return found

    def _view(self, key: tuple[WorkloadKind, str]) -> WorkloadObject:
        seen = super()._view(key)
        return evolve(seen, record=None) if key[1] in self.unrecorded else seen


def test_an_object_gone_or_without_a_record_once_decided_gets_no_server() -> None:
    cluster = fleet("m1", "m2", clock=Clock(START))
    objects = cluster.objects = LostObjects(cluster)
    objects.gone.add("chat")
    objects.unrecorded.add("job")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="job", model="qwen"))
    controller(cluster).resync()
    assert {w for w, _ in held_cards(cluster)} == {"chat", "job"}
    assert cluster.pods.pods == {}
