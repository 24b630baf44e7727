"""The controller's use cases over the contract-checked fakes: decide, start, serve, finish.

Each test drives ``Controller.resync`` on a ``FakeCluster`` whose servers run only when told
(``pods.run``, ``pods.end``), then asserts on records, ledger, objects, servers and events.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from attrs import evolve

from nodeau.adapters.kube.report_form import MachineReport
from nodeau.apps.controller.loop import Controller
from nodeau.apps.controller.reading import FleetReading, proved_reader
from nodeau.apps.controller.turns import Turns
from nodeau.apps.serving.commands import LogsUnavailable
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.health import Health, MachineHealth, Signal
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts
from nodeau.domain.memory import GIB
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import ServerExit, WorkloadKind, WorkloadState
from nodeau.ports.cluster import ClusterError, NoAnswer, ServerPod
from nodeau.ports.state import UnknownWorkload, WorkloadRecord
from nodeau.ports.workload_objects import Condition, WorkloadObject
from tests.support.builders.summaries import SUMMARY
from tests.support.clock import Clock, ticking
from tests.support.fakes.controller_fleet import (
    AGAIN,
    ENDED,
    ENDPOINT,
    SMALL,
    START,
    UnreadableObjects,
    controller,
    crash_loop,
    fleet,
    fleet_plane,
    held,
    held_cards,
    record,
    serving_chat,
    state,
    status_of,
    tick,
)
from tests.support.fakes.fake_cluster import FakeCluster, FakeServerPods, gpu_uuid, verified
from tests.support.fakes.fake_runtime import SEES_A_CARD

SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
S = WorkloadState


def reading_of(ctl: Controller) -> FleetReading:
    """One batch's reading of the fleet, as ``reconcile_all`` makes it."""
    return FleetReading(
        ctl.read_fleet, ctl.ports.health.read, proved_reader(None, None), ctl.spending
    )


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
    assert cluster.events.reasons("chat") == ["Started"]

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
    assert cluster.events.reasons("chat") == ["Started", "Serving"]

    ctl.resync()  # settled: nothing more is written or said
    assert cluster.events.reasons("chat") == ["Started", "Serving"]


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


def test_a_refused_object_is_never_guarded_so_deleting_it_is_immediate() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="big", model="giant"))
    controller(cluster).resync()
    obj = cluster.objects.get(SERVICE, "big")
    assert obj is not None and obj.refused and not obj.guarded
    cluster.objects.delete(SERVICE, "big")
    assert cluster.objects.get(SERVICE, "big") is None  # nothing of it to release


def test_an_admitted_object_is_guarded_before_its_server_is_made() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    assert ctl.reconciler.decide(SERVICE, "chat", reading_of(ctl))  # decided, not carried out
    decided = cluster.objects.get(SERVICE, "chat")
    assert decided is not None and decided.decided and not decided.guarded
    assert cluster.pods.pods == {}
    ctl.reconciler.carry_out(SERVICE, "chat", reading_of(ctl))
    carried = cluster.objects.get(SERVICE, "chat")
    assert carried is not None and carried.guarded
    assert list(cluster.pods.pods) == [(SERVICE, "chat")]


def test_an_admitted_object_deleted_before_its_guard_frees_its_card_and_gets_no_server() -> None:
    cluster = fleet("m1")
    ctl = decided_chat(cluster)
    assert held_cards(cluster) == [("chat", gpu_uuid("m1", 0))]
    cluster.objects.stored[SERVICE, "chat"].deleting = True  # another's finalizer keeps it
    ctl.reconcile_all([(SERVICE, "chat")])
    assert cluster.ledger.read() == Ledger()
    assert state(cluster, "chat") is S.STOPPED
    assert cluster.pods.pods == {}


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


def started_nightly(cluster: FakeCluster) -> Controller:
    """The batch job ``nightly`` asked for qwen, and one pass of a controller of ``cluster``."""
    cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    return ctl


def test_a_batch_jobs_server_that_ended_frees_its_card() -> None:
    cluster = fleet("m1")
    ctl = started_nightly(cluster)
    assert state(cluster, "nightly") is S.STARTING
    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "nightly") is S.RUNNING
    assert cluster.events.reasons("nightly") == ["Started", "Running"]
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
    ctl = started_nightly(cluster)
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


# -- a model server restarted in place by its machine's kubelet


CARD = [("chat", gpu_uuid("m1", 0))]


def writes(cluster: FakeCluster, name: str = "chat") -> int:
    """How often the object was written (its version)."""
    return cluster.objects.stored[SERVICE, name].version


# how the container ended, as the Pod says it (the adapter reads exit code 137 as signal 9,
# OOMKilled as signal 9 named so) and as ps says it
ENDS = {
    "exit code 137": (
        ServerExit.killed(9, "SIGKILL", ENDED),
        "its model server was killed by signal 9 (SIGKILL) at 11:00:05",
    ),
    "OOMKilled": (
        ServerExit.killed(9, "OOMKilled", ENDED),
        "its model server was killed by signal 9 (OOMKilled) at 11:00:05",
    ),
    "exit code 1": (
        ServerExit.exited(1, ENDED),
        "its model server exited with code 1 at 11:00:05",
    ),
}


@pytest.mark.parametrize("how", ENDS)
def test_a_services_container_that_ends_is_restarting_keeps_its_card_and_serves_again(
    how: str,
) -> None:
    ended, words = ENDS[how]
    cluster, clock, ctl = serving_chat()

    # the container ended; the kubelet has not restarted it yet
    cluster.pods.report(SERVICE, "chat", ServerRestarts(last_exit=ended, down=True))
    tick(cluster, clock, ENDED + timedelta(seconds=2))
    ctl.resync()
    assert status_of(cluster) == (
        "restarting",
        f"restarting on m1 (GPU-m1-0…) since 11:00:05 (2s): {words}; "
        "restart 1, next attempt at 11:00:15",
        "",
    )
    assert held_cards(cluster) == CARD
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.condition("Ready") == Condition(
        type="Ready",
        ok=False,
        reason="Restarting",
        message=f"chat is restarting: {words}; restart 1, next attempt at 11:00:15",
    )
    said = cluster.events.said[-1]
    assert (said.reason, said.message, said.warning) == (
        "Restarting",
        f"{words}; restart 1, next attempt at 11:00:15",
        True,
    )

    # nothing changed: nothing is written, nothing said
    before, events = writes(cluster), len(cluster.events.said)
    tick(cluster, clock, clock.now + timedelta(seconds=1))
    ctl.resync()
    assert (writes(cluster), len(cluster.events.said)) == (before, events)

    # the kubelet restarted it; the restart ended too, and it waits out a 20 s back-off
    crashed = crash_loop(cluster, clock, ctl)
    assert status_of(cluster) == (
        "restarting",
        "restarting on m1 (GPU-m1-0…) since 11:00:05 (21s): its model server was killed by "
        "signal 9 (OOMKilled) while starting at 11:00:25; restart 2, next attempt at 11:00:45 "
        "(nodeau logs chat shows its log)",
        "",
    )
    assert held_cards(cluster) == CARD
    assert cluster.events.reasons("chat")[-2:] == ["Restarting", "Restarting"]

    # restarted again, and Ready: serving again, its restarts kept
    up = ServerRestarts(count=2, last_exit=crashed, ran_for=timedelta(seconds=8))
    under_way = evolve(up, running_since=AGAIN + timedelta(seconds=20))
    cluster.pods.report(SERVICE, "chat", under_way)  # loading, not Ready yet
    tick(cluster, clock, AGAIN + timedelta(seconds=22))
    ctl.resync()
    assert status_of(cluster)[1].endswith(
        "while starting at 11:00:25; restart 2, next attempt at 11:00:45 "
        "(nodeau logs chat shows its log)"
    )
    assert cluster.events.reasons("chat")[-2:] == ["Restarting", "Restarting"]
    cluster.pods.report(SERVICE, "chat", under_way, ready=True)
    tick(cluster, clock, AGAIN + timedelta(seconds=30))
    ctl.resync()
    assert status_of(cluster) == (
        "serving",
        "serving on m1 (GPU-m1-0…) since 11:00:55 (0s), restarted 2 times, last after its "
        "model server was killed by signal 9 (OOMKilled) while starting at 11:00:25; "
        "nothing to do",
        ENDPOINT,
    )
    assert record(cluster, "chat").workload.restarts == 2
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.condition("Ready") == Condition(
        type="Ready",
        ok=True,
        reason="Serving",
        message=f"serving at {ENDPOINT} on m1 (GPU-m1-0…)",
    )
    assert cluster.events.reasons("chat")[-1] == "Serving"
    assert held_cards(cluster) == CARD
    before, events = writes(cluster), len(cluster.events.said)
    tick(cluster, clock, clock.now + timedelta(minutes=5))
    ctl.resync()
    assert (writes(cluster), len(cluster.events.said)) == (before, events)


def test_a_restart_under_way_is_the_next_attempt_and_is_not_said_twice() -> None:
    cluster, clock, ctl = serving_chat()
    killed = ServerExit.killed(9, "SIGKILL", ENDED)
    started = ENDED + timedelta(seconds=1)
    cluster.pods.report(
        SERVICE, "chat", ServerRestarts(count=1, last_exit=killed, running_since=started)
    )
    tick(cluster, clock, ENDED + timedelta(seconds=3))
    ctl.resync()
    assert status_of(cluster)[1] == (
        "restarting on m1 (GPU-m1-0…) since 11:00:05 (3s): its model server was killed by "
        "signal 9 (SIGKILL) at 11:00:05; restart 1, next attempt at 11:00:06"
    )
    assert cluster.events.reasons("chat").count("Restarting") == 1
    assert held_cards(cluster) == CARD


def test_a_server_that_fails_at_start_is_restarting_and_its_log_is_pointed_at() -> None:
    clock = Clock(START)
    cluster = fleet("m1", clock=clock)
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    assert state(cluster, "chat") is S.STARTING
    failed = ServerExit.exited(1, ENDED)
    cluster.pods.report(
        SERVICE,
        "chat",
        ServerRestarts(
            count=3,
            last_exit=failed,
            ran_for=timedelta(seconds=2),
            down=True,
            backing_off=True,
            backoff=timedelta(seconds=40),
        ),
    )
    tick(cluster, clock, ENDED + timedelta(seconds=1))
    ctl.resync()
    assert status_of(cluster) == (
        "restarting",
        "restarting on m1 (GPU-m1-0…) since 11:00:05 (1s): its model server exited with code "
        "1 while starting at 11:00:05; restart 4, next attempt at 11:00:45 "
        "(nodeau logs chat shows its log)",
        "",
    )
    assert held_cards(cluster) == CARD


def test_a_batch_jobs_server_restarts_in_place_and_the_job_runs_again() -> None:
    clock = Clock(START)
    cluster = fleet("m1", clock=clock)
    ctl = started_nightly(cluster)
    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "nightly") is S.RUNNING
    oom = ServerExit.killed(9, "OOMKilled", ENDED)
    cluster.pods.report(BATCH, "nightly", ServerRestarts(last_exit=oom, down=True))
    tick(cluster, clock, ENDED)
    ctl.resync()
    assert state(cluster, "nightly") is S.RESTARTING
    assert held_cards(cluster) == [("nightly", gpu_uuid("m1", 0))]
    up = ServerRestarts(count=1, last_exit=oom, running_since=ENDED)
    cluster.pods.report(BATCH, "nightly", up, ready=True)
    ctl.resync()
    found = record(cluster, "nightly").workload
    assert (found.state, found.restarts) == (S.RUNNING, 1)
    assert cluster.events.reasons("nightly")[-2:] == ["Restarting", "Running"]


def test_a_restarting_services_pod_that_went_is_made_again() -> None:
    cluster, clock, ctl = serving_chat()
    killed = ServerExit.killed(9, "SIGKILL", ENDED)
    cluster.pods.report(SERVICE, "chat", ServerRestarts(last_exit=killed, down=True))
    tick(cluster, clock, ENDED)
    ctl.resync()
    assert state(cluster, "chat") is S.RESTARTING
    cluster.pods.delete(SERVICE, "chat")  # someone deleted the Pod
    ctl.resync()
    assert (SERVICE, "chat") in cluster.pods.pods
    assert state(cluster, "chat") is S.RESTARTING
    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "chat") is S.SERVING
    assert held_cards(cluster) == CARD


# -- nodeau logs on the fleet (the Kubernetes plane over the same fakes)


def test_nodeau_logs_on_the_fleet_is_the_last_lines_of_the_pods_server_log() -> None:
    cluster, _clock, _ctl = serving_chat()
    cluster.pods.write_log(SERVICE, "chat", "loading", "listening on 0.0.0.0:8080", "oops")
    plane = fleet_plane(cluster)
    assert plane.serving.logs("chat", 2) == ("listening on 0.0.0.0:8080", "oops")
    with pytest.raises(UnknownWorkload, match="no workload called 'other' in the cluster"):
        plane.serving.logs("other", 2)
    cluster.pods.logs_unserved.add("m1")
    with pytest.raises(ClusterError) as raised:
        plane.serving.logs("chat", 2)
    assert raised.value.one_line() == (
        "cannot read the log of chat's model server (Pod service-chat on m1): the API server "
        "could not get it from m1's kubelet (no kubelet answers in the fake)"
    )
    cluster.pods.delete(SERVICE, "chat")
    with pytest.raises(LogsUnavailable) as gone:
        plane.serving.logs("chat", 2)
    assert gone.value.one_line() == (
        "chat has no model server on the fleet now (serving): no log to show; "
        "nodeau ps says what happens next"
    )


# -- what decide answers, the batch's turns, and the objects that change under a pass


def test_decide_answers_false_for_an_object_gone_being_deleted_or_refused() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="big", model="giant"))
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    reading = reading_of(ctl)
    assert ctl.reconciler.decide(SERVICE, "gone", reading) is False  # no object: nothing next
    assert ctl.reconciler.decide(SERVICE, "big", reading) is False  # refused
    assert ctl.reconciler.decide(SERVICE, "big", reading) is False  # refused: stays so
    assert ctl.reconciler.decide(SERVICE, "chat", reading) is True  # admitted: its server next
    ctl.reconciler.carry_out(SERVICE, "chat", reading)
    cluster.objects.delete(SERVICE, "chat")
    assert ctl.reconciler.decide(SERVICE, "chat", reading) is False  # its deletion finished
    assert cluster.objects.get(SERVICE, "chat") is None


def test_decide_answers_false_for_an_object_whose_spec_does_not_read() -> None:
    cluster = fleet("m1")
    objects = cluster.objects = UnreadableObjects(cluster)
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    objects.unreadable.add("chat")
    lines: list[str] = []
    ctl = controller(cluster, lines)
    assert ctl.reconciler.decide(SERVICE, "chat", reading_of(ctl)) is False
    assert lines == ["GPUService chat: its spec does not read; nothing is decided"]
    assert cluster.store.snapshot().workloads == ()


class SeenTurns(Turns):
    """A batch's turns that note each wait (and whether chat was admitted by then) and
    each done (called inside the store's admission: the store is not read then)."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(1)
        self.cluster = cluster
        self.seen: list[tuple[str, bool | None]] = []

    def wait(self, place: int) -> None:
        self.seen.append(("wait", self.cluster.store.snapshot().named("chat") is not None))
        super().wait(place)

    def done(self, place: int) -> None:
        self.seen.append(("done", None))
        super().done(place)


def test_an_object_decides_in_its_turn_and_then_lets_the_next_decide() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    turns = SeenTurns(cluster)
    ctl.reconciler.reconcile(SERVICE, "chat", reading_of(ctl), turns.turn(0))
    # its turn came before it decided; once it had, the next one's came
    assert turns.seen == [("wait", False), ("done", None)]
    assert state(cluster, "chat") is S.STARTING
    assert held_cards(cluster) == [("chat", gpu_uuid("m1", 0))]


def test_a_server_on_a_simulated_card_runs_on_the_cpu() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    controller(cluster).resync()
    assert cluster.pods.on_card == {(SERVICE, "chat"): False}


def real_card_fleet(cuda_image: bool = True) -> FakeCluster:
    """One machine, m1, with one real card its model server says it can use, and qwen."""
    cluster = FakeCluster(ticking(START))
    cluster.pods = FakeServerPods(serves_real_cards=cuda_image)
    cluster.add_node("m1")
    card = Gpu(uuid="GPU-m1-real", model="NVIDIA H200", total_bytes=141 * GIB)
    reading = MachineReading(
        machine="m1",
        gpus=(GpuReading(gpu=card, free_bytes=card.total_bytes, driver_version="580"),),
        simulated=False,
        note="",
    )
    qwen = verified("m1", SUMMARY, sha=SMALL, name="qwen", gib=4)
    cluster.reports.publish(
        MachineReport(reading=reading, at=START, artifacts=(qwen,), server=SEES_A_CARD)
    )
    return cluster


def test_a_real_card_is_served_on_the_card_when_a_cuda_image_is_configured() -> None:
    cluster = real_card_fleet()
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    controller(cluster).resync()
    assert held_cards(cluster) == [("chat", "GPU-m1-real")]
    assert cluster.pods.on_card == {(SERVICE, "chat"): True}
    without = real_card_fleet(cuda_image=False)
    without.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    controller(without).resync()
    refused = without.objects.get(SERVICE, "chat")
    assert refused is not None and refused.refused
    assert refused.status["refusal"]["code"] == "capacity.server-cannot-use-card"


def decided_chat(cluster: FakeCluster) -> Controller:
    """``chat`` asked for qwen and decided (admitted) by a controller of ``cluster``."""
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    assert ctl.reconciler.decide(SERVICE, "chat", reading_of(ctl))
    return ctl


def test_a_card_no_report_names_now_is_taken_by_its_uuid() -> None:
    cluster = fleet("m1")
    ctl = decided_chat(cluster)
    unreported = FleetReading(lambda: evolve(ctl.read_fleet(), reports=()), dict)
    ctl.reconciler.carry_out(SERVICE, "chat", unreported)
    # m1's report is gone: its card's UUID is no simulated card's ("SIM-..."), so a real one
    assert cluster.pods.on_card == {(SERVICE, "chat"): True}


def test_an_object_deleted_as_it_is_guarded_gets_no_server() -> None:
    cluster = fleet("m1")
    ctl = decided_chat(cluster)
    guard = cluster.objects.guard

    def guarded_then_deleted(obj: WorkloadObject) -> bool:
        ok = guard(obj)
        cluster.objects.delete(SERVICE, "chat")  # a person's delete lands right after
        return ok

    cluster.objects.guard = guarded_then_deleted  # type: ignore[method-assign]
    ctl.reconciler.carry_out(SERVICE, "chat", reading_of(ctl))
    assert cluster.pods.pods == {}
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.deleting  # the next pass finishes its deletion


def test_an_object_removed_by_hand_as_it_is_guarded_gets_no_server() -> None:
    cluster = fleet("m1")
    ctl = decided_chat(cluster)
    guard = cluster.objects.guard

    def guarded_then_removed(obj: WorkloadObject) -> bool:
        ok = guard(obj)
        del cluster.objects.stored[SERVICE, "chat"]  # its finalizer taken off by hand, deleted
        return ok

    cluster.objects.guard = guarded_then_removed  # type: ignore[method-assign]
    ctl.reconciler.carry_out(SERVICE, "chat", reading_of(ctl))
    assert cluster.pods.pods == {}


def test_a_deleted_object_another_finalizer_keeps_with_no_record_is_left_alone() -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    cluster.objects.stored[SERVICE, "chat"].deleting = True  # another's finalizer keeps it
    ctl = controller(cluster)
    assert ctl.reconciler.decide(SERVICE, "chat", reading_of(ctl)) is False
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.deleting and obj.record is None
    assert cluster.store.snapshot().workloads == () and cluster.pods.pods == {}


def test_a_release_another_controller_made_first_still_finishes_the_deletion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = fleet("m1")
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.objects.delete(SERVICE, "chat")
    release = cluster.store.release

    def released_first(name: str, change: Callable[[WorkloadRecord], WorkloadRecord]) -> None:
        release(name, change)  # the other controller's release lands first
        raise UnknownWorkload(f"no workload called {name} holds a card")

    monkeypatch.setattr(cluster.store, "release", released_first)
    ctl.reconcile_all([(SERVICE, "chat")])
    assert cluster.ledger.read() == Ledger()
    assert cluster.objects.get(SERVICE, "chat") is None


def test_a_finished_workloads_object_another_finalizer_keeps_is_left_to_it() -> None:
    cluster = fleet("m1")
    ctl = started_nightly(cluster)
    cluster.pods.end(BATCH, "nightly", ok=False)
    ctl.resync()
    assert state(cluster, "nightly") is S.FAILED and cluster.ledger.read() == Ledger()
    obj = cluster.objects.get(BATCH, "nightly")
    assert obj is not None and cluster.objects.unguard(obj)  # our finalizer taken off by hand
    cluster.objects.stored[BATCH, "nightly"].deleting = True  # another's finalizer keeps it
    ctl.reconcile_all([(BATCH, "nightly")])
    assert list(cluster.pods.pods) == [(BATCH, "nightly")]  # its Pod goes with its owner
    kept = cluster.objects.get(BATCH, "nightly")
    assert kept is not None and kept.deleting
