"""Recovery as the apps carry it out, on inputs the other recovery tests leave out.

The server a move leaves behind ended with its event, a service whose model no machine holds held
for its files, and the status rows, choice, wait and event time of apps/recovery and the controller.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from attrs import evolve

from nodeau.apps.recovery.commands import RecoveryListing, RecoveryView
from nodeau.apps.recovery.fleet import choice_of, waits_on_control_plane
from nodeau.apps.recovery.machine import machine_listing
from nodeau.domain.lifecycle import ServerRestarts
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.records import Event, WorkloadRecord
from nodeau.domain.workloads import (
    HeldReason,
    RecoveryMode,
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
)
from nodeau.ports.workload_objects import Condition, WorkloadObject
from tests.support.fakes.controller_fleet import (
    ENDED,
    SERVICE,
    crash_loop,
    record,
    serving_chat,
    status_of,
    tick,
)
from tests.support.fakes.fleet_stories import Story, seconds_until_moved
from tests.support.fakes.machine_plane import NOW, ask, plane_with

S = WorkloadState
AUTO = RecoveryMode.AUTOMATIC
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def test_the_server_a_move_leaves_behind_is_ended_with_an_event_that_says_so() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.off_the_network("m1")
    seconds_until_moved(story)
    story.tick()
    stale = [s for s in story.cluster.events.said if s.reason == "StaleServerEnded"]
    assert [(s.workload, s.message) for s in stale] == [
        (
            "chat",
            "the model server left on m1 is deleted (chat runs on m2 now); m1's own "
            "Kubernetes agent ends it when it answers again, and nothing is routed to it",
        )
    ]
    moved = [line for line in story.lines if line.startswith("chat: recovering on ")]
    assert moved == [
        "chat: recovering on m2 (pack: m2 already holds 0 of its 1 cards, the fullest machine "
        "with a card that fits; GPU-m2-00-0000-sim (24.00 GiB) is the smallest free card "
        "there that takes 5.50 GiB; 0 other candidate(s) ranked below)"
    ]


def test_a_service_whose_model_no_machine_holds_is_held_for_its_files_when_due() -> None:
    story = Story("m1", "m2")
    story.serve()
    no_copies_anywhere(story)
    story.off_the_network("m1")
    story.run_for(300)
    w = record(story.cluster, "chat").workload
    assert (w.state, w.machine, w.held_reason) == (S.HELD, "m1", HeldReason.MODEL_FILES)


# --- one machine's status rows, and the fleet's reading of a choice ---------------------


def held(**changes: object) -> Workload:
    fields: dict[str, object] = {
        "name": "chat",
        "kind": WorkloadKind.SERVICE,
        "model": "qwen",
        "artifact_id": "a" * 64,
        "machine": "m1",
        "gpu_uuid": "GPU-1",
        "state": S.HELD,
        "since": T0,
        "recovery_mode": AUTO,
        "recovery_after": timedelta(minutes=7),
        "held_reason": HeldReason.CAPACITY,
    }
    fields.update(changes)
    return Workload(**fields)  # type: ignore[arg-type]


def record_of(w: Workload) -> WorkloadRecord:
    return WorkloadRecord(workload=w, config=RuntimeConfig(context_tokens=4096), model_path="/m")


def test_one_machine_lists_a_held_service_with_its_sentence_at_that_moment() -> None:
    listing = machine_listing("machine", "m1", [record_of(held())], T0 + timedelta(minutes=5))
    assert listing == RecoveryListing(
        plane="machine",
        control_plane="m1 is the only machine on this plane, and so the one that decides",
        services=(
            RecoveryView(
                name="chat",
                machine="m1",
                state="held",
                choice="automatic after 7m",
                mode="automatic",
                after_seconds=420,
                copies=None,
                last_recovery=None,
                sentence="held since 09:00:00 (5m): m1 stopped answering and no other machine "
                "has a free card that fits; it starts when one frees (no retries)",
                note="this machine is the only one: recovery has nowhere to move it",
            ),
        ),
    )


def test_the_choice_of_an_object_whose_spec_does_not_read_is_its_records() -> None:
    obj = WorkloadObject(
        kind=WorkloadKind.SERVICE,
        name="chat",
        title="GPUService nodeau-system/chat",
        uid="u1",
        version="7",
        generation=1,
        ask=None,
        record=record_of(held()),
    )
    assert choice_of(obj) == (AUTO, timedelta(minutes=7))


def test_only_an_automatic_service_on_the_control_plane_waits_for_it() -> None:
    cp = frozenset({"m1"})
    assert waits_on_control_plane(None, AUTO, cp) is None
    assert waits_on_control_plane(held(), RecoveryMode.NEVER, cp) is None
    assert waits_on_control_plane(held(machine="m2"), AUTO, cp) is None
    assert waits_on_control_plane(held(), AUTO, cp) == (
        "m1 is the control-plane machine, which makes the decision: chat waits for it if it "
        "stops answering"
    )


def test_a_recovery_choice_records_its_event_at_the_moment_it_was_made(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    plane.recovery.set_choice("tiny", AUTO, timedelta(minutes=10))
    assert parts.state.events("tiny")[-1] == Event(
        at=NOW, workload="tiny", text="recovery automatic after 10m; nothing restarts"
    )


def test_a_second_restart_rewrites_the_hidden_endpoints_ready_condition() -> None:
    """The endpoint is already out of status after the first end; the Ready condition still
    follows each end (its message names the attempt now due)."""
    cluster, clock, ctl = serving_chat()
    first = ServerExit.killed(9, "SIGKILL", ENDED)
    cluster.pods.report(SERVICE, "chat", ServerRestarts(last_exit=first, down=True))
    tick(cluster, clock, ENDED + timedelta(seconds=2))
    ctl.resync()
    assert status_of(cluster)[2] == ""
    crash_loop(cluster, clock, ctl)
    obj = cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.condition("Ready") == Condition(
        type="Ready",
        ok=False,
        reason="Restarting",
        message="chat is restarting: its model server was killed by signal 9 (OOMKilled) "
        "while starting at 11:00:25; restart 2, next attempt at 11:00:45 "
        "(nodeau logs chat shows its log)",
    )


def test_a_moves_admission_is_decided_at_the_moment_of_the_move() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.off_the_network("m1")
    seconds_until_moved(story)
    moved = story.cluster.store.admission("chat")
    assert (moved.placement.machine, moved.decided_at) == (
        "m2",
        datetime(2026, 3, 1, 10, 2, tzinfo=UTC),
    )


def no_copies_anywhere(story: Story) -> None:
    for report in list(story.cluster.reports.reports.values()):
        story.cluster.reports.publish(evolve(report, artifacts=()))


def test_on_the_control_plane_machine_it_waits_even_when_no_machine_holds_its_files() -> None:
    story = Story("m1", "m2", control_plane="m1")
    story.serve()
    no_copies_anywhere(story)
    story.off_the_network("m1")
    story.run_for(300)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.held_reason) == ("m1", HeldReason.ON_CONTROL_PLANE_MACHINE)


def test_before_its_delay_it_waits_even_when_no_machine_holds_its_files() -> None:
    story = Story("m1", "m2")
    story.serve(recovery_after=timedelta(minutes=10))
    no_copies_anywhere(story)
    story.off_the_network("m1")
    story.run_for(120)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.held_reason) == ("m1", HeldReason.WAITING_FOR_DELAY)


def test_a_choice_set_to_never_just_before_the_move_is_the_one_decided_by() -> None:
    story = Story("m1", "m2")
    story.serve(recovery_after=timedelta(seconds=60))
    story.off_the_network("m1")
    story.run_for(90)
    assert story.machine_of() == "m1"
    story.cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.NEVER, timedelta(seconds=60))
    story.run_for(300)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.recovery_mode) == ("m1", RecoveryMode.NEVER)


def test_a_served_workload_whose_machine_goes_quiet_is_fenced_with_an_event() -> None:
    story = Story("m1", "m2")
    story.serve(recovery=RecoveryMode.NEVER)
    story.off_the_network("m1")
    story.run_for(120)
    fenced = [(s.reason, s.message) for s in story.cluster.events.said if s.reason == "Fenced"]
    assert fenced == [
        ("Fenced", "unreachable since 10:01:00: both signals quiet; no request is routed to it")
    ]
