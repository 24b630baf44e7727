"""The cluster ports' contract: every test here runs against each cluster that takes it.

Each test takes a ``cluster`` (a ``Harness``); tests/contract/test_cluster_ports.py runs them on
the in-memory fake, tests/kube/test_cluster_ports_contract.py on the Kubernetes adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Protocol

import pytest
from attrs import evolve
from returns.pipeline import is_successful

from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.copies import Ask, CopyPhase, CopyProgress, CopyRequest, recovery_asker
from nodeau.domain.health import Health, MachineHealth, Signal
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts, with_state
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, ServerExit, WorkloadKind, WorkloadState
from nodeau.ports.cluster import (
    ClusterError,
    EventLog,
    FleetMarks,
    HealthRecords,
    MachineReports,
    ModelCopies,
    ReservationLedger,
    ServerPods,
    UnknownMachine,
)
from nodeau.ports.state import Admission, StateStore, UnknownWorkload
from nodeau.ports.workload_objects import Condition, WorkloadObjects
from tests.support.builders.admissions import ARTIFACT, decider, fleet_of
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.fake_cluster import machine_report, verified

START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 1, 12, 0, 0, 250, tzinfo=UTC)
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH


class Harness(Protocol):
    """A cluster's ports, and the world around them."""

    @property
    def store(self) -> StateStore: ...

    @property
    def objects(self) -> WorkloadObjects: ...

    @property
    def pods(self) -> ServerPods: ...

    @property
    def marks(self) -> FleetMarks: ...

    @property
    def reports(self) -> MachineReports: ...

    @property
    def health(self) -> HealthRecords: ...

    @property
    def ledger(self) -> ReservationLedger: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def copies(self) -> ModelCopies: ...

    def add_node(self, name: str, *, control_plane: bool = False) -> None: ...

    def said(self, workload: str) -> list[str]:
        """The messages of every event recorded about the workload, oldest first."""
        ...

    def settle(self, done: Callable[[], bool], what: str) -> None:
        """Let the machines run their servers until ``done()`` holds."""
        ...

    def kubelet_says(
        self, kind: WorkloadKind, workload: str, restarts: ServerRestarts, *, ready: bool
    ) -> None:
        """The server's machine (its kubelet) says what became of it: its ends, its
        restarts, whether it answers."""
        ...

    def logs_unserved(self, machine: str) -> None:
        """The machine's kubelet gives no logs (KWOK's never do)."""
        ...


def service(name: str = "chat", **fields: object) -> WorkloadAsk:
    return WorkloadAsk(kind=SERVICE, name=name, model="qwen-race", **fields)  # type: ignore[arg-type]


def admitted(cluster: Harness, name: str = "chat", cards: int = 1) -> Admission:
    outcome = cluster.store.admit(name, decider(name, fleet_of(cards), NOW))
    assert is_successful(outcome), outcome
    found: Admission = outcome.unwrap()
    return found


# -- workload objects


def test_an_object_is_created_once_and_read_back_as_asked(cluster: Harness) -> None:
    asked = service(
        task=Task.EMBED,
        context_tokens=2048,
        recovery=RecoveryMode.AUTOMATIC,
        recovery_after=timedelta(seconds=90),
    )
    assert cluster.objects.create(asked) is True
    assert cluster.objects.create(service()) is False
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    assert found.ask == asked
    assert (found.kind, found.name, found.record) == (SERVICE, "chat", None)
    assert (found.decided, found.refused, found.guarded, found.deleting) == (
        False,
        False,
        False,
        False,
    )
    assert found.endpoint == ""
    assert found.condition("Ready") is None
    assert cluster.objects.get(BATCH, "chat") is None
    assert cluster.objects.find("nothing") is None


def test_find_prefers_the_gpuservice_and_listing_is_services_then_jobs_oldest_first(
    cluster: Harness,
) -> None:
    job = WorkloadAsk(kind=BATCH, name="chat", model="qwen-race", requests=())
    for ask in (service("a"), job, service("b")):  # (creation is kept to the second)
        assert cluster.objects.create(ask)
    found = cluster.objects.find("chat")
    assert found is not None and found.kind is BATCH
    assert cluster.objects.create(service("chat"))
    found = cluster.objects.find("chat")
    assert found is not None and found.kind is SERVICE
    listed = [(o.kind, o.name) for o in cluster.objects.list_all()]
    assert listed == [(SERVICE, "a"), (SERVICE, "b"), (SERVICE, "chat"), (BATCH, "chat")]


def test_the_endpoint_is_asked_off_and_on(cluster: Harness) -> None:
    cluster.objects.create(service())
    cluster.objects.want_endpoint(SERVICE, "chat", serving=False)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None and found.ask is not None and found.ask.endpoint_stopped
    cluster.objects.want_endpoint(SERVICE, "chat", serving=True)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None and found.ask is not None and not found.ask.endpoint_stopped
    with pytest.raises(UnknownWorkload):
        cluster.objects.want_endpoint(SERVICE, "nothing", serving=False)


def test_a_services_recovery_choice_changes_in_its_spec_alone(cluster: Harness) -> None:
    asked = service(context_tokens=2048, endpoint_stopped=True)
    cluster.objects.create(asked)
    record = admitted(cluster).record
    before = cluster.objects.get(SERVICE, "chat")
    assert before is not None
    ten_minutes = timedelta(minutes=10)
    cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.AUTOMATIC, ten_minutes)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None and found.uid == before.uid
    assert found.ask == evolve(asked, recovery=RecoveryMode.AUTOMATIC, recovery_after=ten_minutes)
    assert (found.spec["recovery"], found.spec["recoveryAfterSeconds"]) == ("automatic", 600)
    # the status, and the record in it, are the controller's to change: untouched
    assert found.record == record and found.status == before.status
    cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.NEVER, timedelta(minutes=3))
    again = cluster.objects.get(SERVICE, "chat")
    assert again is not None and again.ask is not None
    assert (again.ask.recovery, again.ask.recovery_after) == (
        RecoveryMode.NEVER,
        timedelta(minutes=3),
    )
    with pytest.raises(UnknownWorkload):
        cluster.objects.set_recovery(SERVICE, "nothing", RecoveryMode.AUTOMATIC, ten_minutes)


def test_a_batch_job_has_no_recovery_to_change(cluster: Harness) -> None:
    job = WorkloadAsk(kind=BATCH, name="nightly", model="qwen-race", requests=())
    cluster.objects.create(job)
    with pytest.raises(ValueError, match="recovery applies to served workloads; nightly is a"):
        cluster.objects.set_recovery(BATCH, "nightly", RecoveryMode.AUTOMATIC, timedelta(1))
    found = cluster.objects.get(BATCH, "nightly")
    assert found is not None and found.ask == job


def test_a_guarded_object_stays_deleting_until_it_is_unguarded(cluster: Harness) -> None:
    cluster.objects.create(service())
    first = cluster.objects.get(SERVICE, "chat")
    assert first is not None
    assert cluster.objects.guard(first)
    guarded = cluster.objects.get(SERVICE, "chat")
    assert guarded is not None and guarded.guarded
    assert not cluster.objects.unguard(first)  # read before the guard: it changed since
    cluster.objects.delete(SERVICE, "chat")
    deleting = cluster.objects.get(SERVICE, "chat")
    assert deleting is not None and deleting.deleting and deleting.guarded
    assert cluster.objects.unguard(deleting)
    assert cluster.objects.get(SERVICE, "chat") is None
    cluster.objects.delete(SERVICE, "chat")  # none by that name: fine


def test_an_unguarded_object_goes_at_once(cluster: Harness) -> None:
    cluster.objects.create(service())
    cluster.objects.delete(SERVICE, "chat")
    assert cluster.objects.get(SERVICE, "chat") is None
    cluster.objects.create(service())
    stale = cluster.objects.get(SERVICE, "chat")
    assert stale is not None
    cluster.objects.want_endpoint(SERVICE, "chat", serving=False)
    assert not cluster.objects.guard(stale)


def test_set_status_merges_fields_and_states_conditions(cluster: Harness) -> None:
    cluster.objects.create(service())
    loading = Condition(type="Ready", ok=False, reason="Starting", message="loading")
    cluster.objects.set_status(SERVICE, "chat", {"endpoint": "http://x/v1"}, [loading], START)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    assert (found.endpoint, found.condition("Ready")) == ("http://x/v1", loading)
    serving = Condition(type="Ready", ok=True, reason="Serving", message="answering")
    cluster.objects.set_status(SERVICE, "chat", {"endpoint": None}, [serving], START)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    assert (found.endpoint, found.condition("Ready")) == ("", serving)
    with pytest.raises(ValueError, match="may not write record"):
        cluster.objects.set_status(SERVICE, "chat", {"record": {}}, (), START)
    with pytest.raises(UnknownWorkload):
        cluster.objects.set_status(BATCH, "chat", {"endpoint": ""}, (), START)


def test_a_refusal_is_shown_on_the_object_with_a_warning_event(cluster: Harness) -> None:
    refusal = Refusal.of(ReasonCode.NO_FREE_CARD, "every card that fits is held")
    with pytest.raises(UnknownWorkload):
        cluster.objects.record_refusal(SERVICE, "chat", refusal, START)
    cluster.objects.create(service())
    cluster.objects.record_refusal(SERVICE, "chat", refusal, START)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    assert (found.decided, found.refused, found.record) == (True, True, None)
    said = "capacity.no-free-card: every card that fits is held"
    assert found.condition("Admitted") == Condition(
        type="Admitted", ok=False, reason="Capacity", message=said
    )
    assert found.status["refusal"] == {
        "kind": "capacity",
        "code": "capacity.no-free-card",
        "message": "every card that fits is held",
    }
    assert said in cluster.said("chat")
    assert cluster.ledger.read() == Ledger()


def test_an_admission_shows_on_the_object_and_in_the_ledger(cluster: Harness) -> None:
    cluster.objects.create(service())
    chat = admitted(cluster)
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    assert (found.decided, found.refused, found.record) == (True, False, chat.record)
    assert found.status["state"] == "admitted"
    assert (found.status["machine"], found.status["gpuUUID"]) == ("m1", "GPU-0000-race")
    assert cluster.ledger.read().reservations == (chat.placement.reservation,)
    assert cluster.objects.admission(found) == chat  # read back as the value it was
    # an admission with no object yet makes one, as a person would have applied it
    embed = admitted(cluster, "embed", cards=2)
    made = cluster.objects.get(SERVICE, "embed")
    assert made is not None and made.record == embed.record
    assert made.ask is not None and made.ask.model == "qwen-race"
    assert cluster.objects.admission(made) == embed


# -- servers


def test_a_server_is_made_once_runs_and_goes(cluster: Harness) -> None:
    cluster.add_node("m1")
    cluster.objects.create(service())
    record = admitted(cluster).record
    owner = cluster.objects.get(SERVICE, "chat")
    assert owner is not None
    assert cluster.pods.read(SERVICE, "chat") is None
    assert cluster.pods.create(record, owner, on_card=False) is True
    assert cluster.pods.create(record, owner, on_card=False) is False
    made = cluster.pods.read(SERVICE, "chat")
    assert made is not None
    assert (made.workload, made.kind, made.machine, made.gpu_uuid) == (
        "chat",
        SERVICE,
        "m1",
        "GPU-0000-race",
    )
    assert made.phase in (ServerPhase.STARTING, ServerPhase.READY)

    def ready() -> bool:
        now = cluster.pods.read(SERVICE, "chat")
        return now is not None and now.phase is ServerPhase.READY

    cluster.settle(ready, "the server answers")
    up = cluster.pods.read(SERVICE, "chat")
    assert up is not None and up.endpoint is not None and up.endpoint.startswith("http://")
    assert cluster.pods.read(BATCH, "chat") is None
    assert cluster.pods.delete(SERVICE, "chat") is True
    gone = cluster.pods.read(SERVICE, "chat")
    assert gone is None or gone.phase is ServerPhase.DELETING
    assert cluster.pods.delete(BATCH, "chat") is False


def test_every_server_is_read_at_once_as_each_reads_alone(cluster: Harness) -> None:
    cluster.add_node("m1")
    assert cluster.pods.read_all() == ()
    owners = []
    for name in ("embed", "chat"):
        cluster.objects.create(service(name))
        record = admitted(cluster, name, cards=2).record
        owner = cluster.objects.get(SERVICE, name)
        assert owner is not None
        owners.append(owner)
        assert cluster.pods.create(record, owner, on_card=False) is True
    # once both run (a kubelet moves a server on between two reads otherwise)
    cluster.settle(
        lambda: all(s.phase is ServerPhase.READY for s in cluster.pods.read_all()),
        "both servers ready",
    )
    every = cluster.pods.read_all()
    assert [(s.kind, s.workload) for s in every] == [(SERVICE, "chat"), (SERVICE, "embed")]
    assert every == (cluster.pods.read(SERVICE, "chat"), cluster.pods.read(SERVICE, "embed"))
    assert {s.gpu_uuid for s in every} == {"GPU-0000-race", "GPU-0001-race"}
    assert cluster.pods.delete(SERVICE, "embed", force=True) is True
    assert [s.workload for s in cluster.pods.read_all() if s.phase is not ServerPhase.DELETING] == [
        "chat"
    ]


# what a kubelet says of a server's ends (whole seconds: the API keeps no more)
ENDED = datetime(2026, 3, 1, 11, 0, 5, tzinfo=UTC)
RAN = timedelta(minutes=3)
KUBELET_SAYS = {
    "killed, waiting out a 20 s back-off": ServerRestarts(
        count=2,
        last_exit=ServerExit.killed(9, "SIGKILL", ENDED),
        ran_for=RAN,
        down=True,
        backing_off=True,
        backoff=timedelta(seconds=20),
    ),
    "out of memory, back-off over a minute": ServerRestarts(
        count=5,
        last_exit=ServerExit.killed(9, "OOMKilled", ENDED),
        ran_for=RAN,
        down=True,
        backing_off=True,
        backoff=timedelta(seconds=80),
    ),
    "exited 1, not restarted yet": ServerRestarts(
        last_exit=ServerExit.exited(1, ENDED), ran_for=RAN, down=True
    ),
    "terminated by signal 15, restarted, loading": ServerRestarts(
        count=1,
        last_exit=ServerExit.killed(15, "SIGTERM", ENDED),
        ran_for=RAN,
        running_since=ENDED + timedelta(seconds=1),
    ),
}


def running_server(cluster: Harness) -> None:
    """chat admitted on m1, its server made and answering."""
    cluster.add_node("m1")
    cluster.objects.create(service())
    record = admitted(cluster).record
    owner = cluster.objects.get(SERVICE, "chat")
    assert owner is not None and cluster.pods.create(record, owner, on_card=False)

    def ready() -> bool:
        now = cluster.pods.read(SERVICE, "chat")
        return now is not None and now.phase is ServerPhase.READY

    cluster.settle(ready, "the server answers")


@pytest.mark.parametrize("said", KUBELET_SAYS)
def test_what_the_kubelet_says_of_a_servers_ends_is_read_back(cluster: Harness, said: str) -> None:
    running_server(cluster)
    first = cluster.pods.read(SERVICE, "chat")
    assert first is not None and first.restarts == ServerRestarts()
    restarts = KUBELET_SAYS[said]
    cluster.kubelet_says(SERVICE, "chat", restarts, ready=False)
    down = cluster.pods.read(SERVICE, "chat")
    assert down is not None
    assert (down.phase, down.restarts) == (ServerPhase.STARTING, restarts)
    up = ServerRestarts(
        count=restarts.count + 1,
        last_exit=restarts.last_exit,
        ran_for=restarts.ran_for,
        running_since=ENDED + timedelta(minutes=1),
    )
    cluster.kubelet_says(SERVICE, "chat", up, ready=True)
    again = cluster.pods.read(SERVICE, "chat")
    assert again is not None
    assert (again.phase, again.restarts) == (ServerPhase.READY, up)
    assert again.endpoint is not None and again.endpoint.startswith("http://")


def test_a_servers_log_needs_a_server_and_a_machine_that_gives_it(cluster: Harness) -> None:
    assert cluster.pods.log_tail(SERVICE, "chat", 10) is None
    running_server(cluster)
    cluster.logs_unserved("m1")
    with pytest.raises(ClusterError) as raised:
        cluster.pods.log_tail(SERVICE, "chat", 10)
    assert raised.value.one_line().startswith(
        "cannot read the log of chat's model server (Pod service-chat on m1): the API server "
        "could not get it from m1's kubelet ("
    )
    assert cluster.pods.log_tail(BATCH, "chat", 10) is None


# -- events


def test_an_event_is_kept_about_its_workload(cluster: Harness) -> None:
    cluster.objects.create(service())
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    cluster.events.record(found, "Placed", "on m1, the fullest card", START)
    cluster.events.record(found, "Started", "model server created", START + timedelta(seconds=1))
    said = cluster.said("chat")
    assert said.index("on m1, the fullest card") < said.index("model server created")
    assert cluster.said("other") == []


def test_events_recorded_while_held_are_kept_in_order_once_it_ends(cluster: Harness) -> None:
    cluster.objects.create(service())
    found = cluster.objects.get(SERVICE, "chat")
    assert found is not None
    with cluster.events.held():
        cluster.events.record(found, "Admitted", "on m1", START)
        cluster.events.record(found, "Started", "model server created", START)
    cluster.events.flush()
    said = cluster.said("chat")
    assert said.index("on m1") < said.index("model server created")


# -- marks, reports, health


def test_marks_start_empty_and_what_is_written_is_read_back(cluster: Harness) -> None:
    cluster.add_node("m1")
    cluster.add_node("cp", control_plane=True)
    marks = cluster.marks.read()
    assert marks.nodes == ("cp", "m1")
    assert (marks.drained, marks.upgrading, marks.control_plane) == (
        frozenset(),
        frozenset(),
        frozenset({"cp"}),
    )
    assert marks.settings == SchedulingSettings()
    cluster.marks.write_drained("m1", START)
    assert cluster.marks.read().drained == frozenset({"m1"})
    cluster.marks.write_drained("m1", None)
    assert cluster.marks.read().drained == frozenset()
    cluster.marks.write_policy(Policy.SPREAD)
    cluster.marks.write_policy(Policy.PACK, "m1")
    assert cluster.marks.read().settings == SchedulingSettings(
        fleet_policy=Policy.SPREAD, overrides=(("m1", Policy.PACK),)
    )
    cluster.marks.write_policy(Policy.PACK)
    assert cluster.marks.read().settings == SchedulingSettings(
        fleet_policy=Policy.PACK, overrides=(("m1", Policy.PACK),)
    )
    assert cluster.marks.read().nodes == ("cp", "m1")  # writing a mark adds no machine


def test_the_upgrading_mark_is_written_read_as_a_signal_and_taken_off(cluster: Harness) -> None:
    cluster.add_node("m1")
    cluster.add_node("m2")
    cluster.marks.write_upgrading("m1", True)
    assert cluster.marks.read().upgrading == frozenset({"m1"})
    signals = cluster.reports.signals()  # what the controller's health pass reads
    assert (signals["m1"].upgrading, signals["m2"].upgrading) == (True, False)
    cluster.marks.write_upgrading("m1", False)
    assert cluster.marks.read().upgrading == frozenset()
    assert not cluster.reports.signals()["m1"].upgrading


def test_a_mark_written_for_a_machine_not_in_the_fleet_is_refused(cluster: Harness) -> None:
    cluster.add_node("m1")
    for unknown in (
        lambda: cluster.marks.write_drained("m9", START),
        lambda: cluster.marks.write_drained("m9", None),
        lambda: cluster.marks.write_upgrading("m9", True),
        lambda: cluster.marks.write_policy(Policy.PACK, "m9"),
    ):
        with pytest.raises(UnknownMachine, match=r"^no machine called 'm9' in the cluster"):
            unknown()
    assert cluster.marks.read().nodes == ("m1",)


def test_the_last_report_of_each_machine_is_read_back_whole(cluster: Harness) -> None:
    cluster.add_node("m1")
    assert cluster.reports.read().reports == ()
    model = verified("m1", SUMMARY, sha=ARTIFACT, name="qwen", gib=4)
    first = machine_report("m1", 2, model, at=START)
    cluster.reports.publish(first)
    later = machine_report("m1", 1, at=START - timedelta(minutes=1))  # the last publish wins
    other = machine_report("m2", 1, at=START)  # a machine that is not a Node (yet)
    cluster.reports.publish(other)
    assert cluster.reports.read().reports == (first, other)
    cluster.reports.publish(later)
    assert cluster.reports.read().reports == (later, other)
    assert cluster.reports.read().problems == ()
    signals = cluster.reports.signals()
    assert set(signals) == {"m1"}
    assert (signals["m1"].agent_report_at, signals["m1"].upgrading) == (later.at, False)


def test_health_records_are_what_was_written_last(cluster: Harness) -> None:
    assert cluster.health.read() == {}
    quiet = MachineHealth(
        state=Health.UNREACHABLE,
        since=START,
        quiet=frozenset({Signal.NODE_HEARTBEAT, Signal.AGENT_REPORT}),
        sentence="m2 stopped answering",
    )
    fine = MachineHealth(state=Health.REPORTING, since=None, quiet=frozenset(), sentence="ok")
    cluster.health.write({"m1": fine, "m2": quiet})
    assert cluster.health.read() == {"m1": fine, "m2": quiet}
    cluster.health.write({"m1": fine})
    assert cluster.health.read() == {"m1": fine}


def test_the_ledger_is_the_stores(cluster: Harness) -> None:
    assert cluster.ledger.read() == Ledger()
    cluster.objects.create(service())
    chat = admitted(cluster)
    assert cluster.ledger.read() == Ledger(reservations=(chat.placement.reservation,))
    cluster.store.release("chat", lambda r: with_state(r, WorkloadState.STOPPED, NOW))
    assert cluster.ledger.read() == Ledger()


# -- copies


OTHER = "b" * 64


def test_a_report_carries_its_copies_progress_and_reads_back_whole(cluster: Harness) -> None:
    waiting = CopyProgress(
        artifact=OTHER, since=START, phase=CopyPhase.WAITING, reason="waiting behind qwen"
    )
    fetching = CopyProgress(
        artifact=ARTIFACT, since=START, phase=CopyPhase.FETCHING, bytes_done=5, bytes_total=9
    )
    report = evolve(machine_report("m1", 1, at=START), copies=(fetching, waiting))
    cluster.reports.publish(report)
    assert cluster.reports.read().reports == (report,)


def test_copy_requests_are_made_joined_and_kept_by_machine_then_artifact(
    cluster: Harness,
) -> None:
    assert cluster.copies.requests() == ()
    later = START + timedelta(minutes=5)
    first = cluster.copies.request("m2", ARTIFACT, "qwen", "person", START)
    assert first == CopyRequest(
        machine="m2", artifact=ARTIFACT, name="qwen", since=START,
        askers=(Ask(asker="person", at=START),),
    )  # fmt: skip
    chat = recovery_asker("chat")
    joined = cluster.copies.request("m2", ARTIFACT, "qwen-again", chat, later)
    both = (Ask(asker="person", at=START), Ask(asker=chat, at=later))
    assert joined == evolve(first, askers=both)
    assert cluster.copies.request("m2", ARTIFACT, "qwen", "person", later) == joined  # no change
    other = cluster.copies.request("m1", OTHER, "llama", "person", later)
    third = cluster.copies.request("m2", OTHER, "llama", "person", later)
    assert cluster.copies.requests() == (other, joined, third)


def test_a_request_stays_while_any_asker_holds_it_and_goes_with_the_last(
    cluster: Harness,
) -> None:
    chat = recovery_asker("chat")
    cluster.copies.request("m1", ARTIFACT, "qwen", "person", START)
    both = cluster.copies.request("m1", ARTIFACT, "qwen", chat, START)
    assert cluster.copies.withdraw("m1", ARTIFACT, recovery_asker("other")) == both  # no ask
    assert cluster.copies.withdraw("m2", ARTIFACT, "person") is None  # no request
    kept = cluster.copies.withdraw("m1", ARTIFACT, "person")
    assert kept == evolve(both, askers=(Ask(asker=chat, at=START),))
    assert cluster.copies.requests() == (kept,)
    assert cluster.copies.withdraw("m1", ARTIFACT, chat) is None
    assert cluster.copies.requests() == ()
    again = cluster.copies.request("m1", ARTIFACT, "qwen", "person", NOW)
    assert again.since == NOW  # made again: a new request


def test_requests_made_at_once_by_several_writers_are_all_kept(cluster: Harness) -> None:
    machines = [f"m{i}" for i in range(4)]
    with ThreadPoolExecutor(max_workers=len(machines)) as pool:
        made = list(
            pool.map(
                lambda m: cluster.copies.request(m, ARTIFACT, "qwen", "person", START), machines
            )
        )
    assert cluster.copies.requests() == tuple(made)
