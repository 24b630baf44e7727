"""Recovery through the controller, over the contract-checked fakes: each rule pass by pass.

The rules are docs/recovery's. A ``Clock`` the test moves is time; ``tick`` has every machine that
answers renew both signals; the controller assesses and recovers on every ``resync``.
"""

from __future__ import annotations

import json
from datetime import timedelta

from attrs import evolve

from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.health import Health
from nodeau.domain.workloads import (
    HeldReason,
    RecoveryMode,
    WorkloadKind,
    WorkloadState,
    ps_sentence,
)
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.controller_fleet import SMALL, START, held_cards, record, state
from tests.support.fakes.fake_cluster import gpu_uuid, machine_report, verified
from tests.support.fakes.fleet_stories import DELAY, STEP, Story, seconds_until_moved

S = WorkloadState
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
AUTO = RecoveryMode.AUTOMATIC


def test_an_automatic_service_moves_after_its_delay_and_not_a_second_before() -> None:
    story = Story("m1", "m2", "m3")
    story.serve()
    assert story.machine_of() == "m1"
    gone_at = story.clock.now  # its last renewal
    story.off_the_network("m1")

    waited = seconds_until_moved(story)
    # unreachable once both signals are quiet (the node's 40 s grace is the longer), then
    # the delay; the pass that moves is the first at or after that moment
    quiet_at = gone_at + timedelta(seconds=40)
    assert story.cluster.health.read()["m1"].since == quiet_at
    assert gone_at + timedelta(seconds=waited) >= quiet_at + DELAY
    assert waited - STEP < (quiet_at + DELAY - gone_at).total_seconds()

    moved = record(story.cluster, "chat").workload
    assert (moved.state, moved.machine, moved.recoveries) == (S.RECOVERING, "m2", 1)
    assert moved.last_recovery is not None
    assert (moved.last_recovery.from_machine, moved.last_recovery.to_machine) == ("m1", "m2")
    assert held_cards(story.cluster) == [("chat", gpu_uuid("m2", 0))]  # one card, the new one
    pod = story.cluster.pods.read(SERVICE, "chat")
    assert pod is not None and pod.machine == "m2"  # exactly one server, on the new machine
    assert story.cluster.pods.forced == 1  # the one left on m1, taken out at once
    story.cluster.pods.run()
    story.tick()
    assert state(story.cluster, "chat") is S.SERVING
    assert story.machine_of() == "m2"


def test_held_while_waiting_for_the_delay_says_when_it_moves() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.off_the_network("m1")
    story.run_for(50)
    w = record(story.cluster, "chat").workload
    assert (w.state, w.held_reason) == (S.HELD, HeldReason.WAITING_FOR_DELAY)
    obj = story.cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.endpoint == ""  # fenced: nothing routed to m1
    ready = obj.condition("Ready")
    assert ready is not None and (ready.ok, ready.reason) == (False, "MachineUnreachable")


def test_recovery_never_waits_for_its_machine_however_long() -> None:
    story = Story("m1", "m2")
    story.serve(recovery=RecoveryMode.NEVER)
    story.off_the_network("m1")
    story.run_for(3600)
    w = record(story.cluster, "chat").workload
    assert (w.state, w.machine, w.held_reason) == (
        S.HELD,
        "m1",
        HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
    )
    assert held_cards(story.cluster) == [("chat", gpu_uuid("m1", 0))]


def test_one_quiet_signal_is_degraded_and_moves_nothing() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.cluster.reports.publish(
        evolve(story.cluster.reports.reports["m1"], at=START - timedelta(hours=1))
    )
    story.quiet.add("m1")  # nothing renews...
    for _ in range(60):
        story.clock.now += timedelta(seconds=STEP)
        story.cluster.nodes["m1"].heartbeat_at = story.clock.now  # ...but its kubelet
        story.renew()
        story.ctl.resync()
    assert story.health("m1") is Health.DEGRADED
    assert (state(story.cluster, "chat"), story.machine_of()) == (S.SERVING, "m1")


def test_a_flapping_machine_never_moves_anything() -> None:
    story = Story("m1", "m2")
    story.serve()
    for _ in range(10):  # quiet 90 s (unreachable for 50 s of a 60 s delay), then back once
        story.off_the_network("m1")
        story.run_for(90)
        assert story.machine_of() == "m1"
        story.back("m1")
        story.tick()
    assert story.machine_of() == "m1"
    assert record(story.cluster, "chat").workload.recoveries == 0


def test_a_machine_marked_upgrading_moves_nothing() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.cluster.nodes["m1"].upgrading = True
    story.off_the_network("m1")
    story.run_for(600)
    assert story.health("m1") is Health.UPGRADING
    assert story.machine_of() == "m1"


def test_a_workload_on_the_control_plane_machine_waits_for_it() -> None:
    story = Story("m1", "m2", control_plane="m1")
    story.serve()
    story.off_the_network("m1")
    story.run_for(600)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.held_reason) == ("m1", HeldReason.ON_CONTROL_PLANE_MACHINE)


def test_the_free_plans_two_machines_follow_the_work_so_a_service_can_move() -> None:
    # Home covers 2 machines: m1 and m2 hold work; when m1 stops answering, its slot goes
    # to a machine that reports (m3), never kept for m1 by name order
    story = Story("m1", "m2", "m3", "m4")
    story.cluster.entitlement.document = None  # no entitlement: the free Home plan
    story.serve("chat")
    story.serve("other")
    assert {story.machine_of("chat"), story.machine_of("other")} == {"m1", "m2"}
    gone = story.machine_of("chat")
    story.off_the_network(gone)
    seconds_until_moved(story)
    assert story.machine_of("chat") == "m3"
    assert story.machine_of("other") != gone


def test_a_drained_machine_is_never_a_target() -> None:
    story = Story("m1", "m2", "m3")
    story.serve()
    story.cluster.marks.write_drained("m2", story.clock.now)
    story.off_the_network("m1")
    seconds_until_moved(story)
    assert story.machine_of() == "m3"


def test_a_machine_the_organisations_limits_leave_out_is_never_a_target() -> None:
    story = Story("m1", "m2", "m3")
    story.serve()
    limits = {"everyone": "admin", "limits": {"allowed_machines": ["m1", "m3"]}}
    story.cluster.organisation.install(json.dumps(limits).encode())
    story.off_the_network("m1")
    seconds_until_moved(story)
    assert story.machine_of() == "m3"


def test_nothing_moves_where_only_the_organisations_limits_would_allow_it() -> None:
    story = Story("m1", "m2")
    story.serve()
    limits = {"everyone": "admin", "limits": {"allowed_machines": ["m1"]}}
    story.cluster.organisation.install(json.dumps(limits).encode())
    story.off_the_network("m1")
    story.run_for(600)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.state, w.held_reason) == ("m1", WorkloadState.HELD, HeldReason.LIMITS)
    said = ps_sentence(w, story.clock.now)
    assert "m1 stopped answering and the organisation's limits or the plan stand in the way" in said
    assert "it moves once the organisation's limits or the plan let it run on a machine" in said


def test_nowhere_to_go_for_capacity_holds_without_writes_then_moves_when_a_card_frees() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.serve("other")  # takes m2's only card
    assert story.machine_of("other") == "m2"
    story.off_the_network("m1")
    story.run_for(120)
    w = record(story.cluster, "chat").workload
    assert (w.state, w.held_reason) == (S.HELD, HeldReason.CAPACITY)

    versions = {k: v.version for k, v in story.cluster.objects.stored.items()}
    events = len(story.cluster.events.said)
    story.run_for(60)  # a minute of being held: nothing written
    assert {k: v.version for k, v in story.cluster.objects.stored.items()} == versions
    assert len(story.cluster.events.said) == events

    story.cluster.objects.delete(SERVICE, "other")
    story.tick()  # other's server goes, its card is released
    story.tick()
    assert story.machine_of() == "m2"
    assert state(story.cluster, "chat") is S.RECOVERING


def test_nowhere_to_go_for_files_moves_once_a_machine_reports_a_verified_copy() -> None:
    story = Story("m1")
    story.cluster.add_node("m2")
    story.cluster.reports.publish(machine_report("m2", 1, at=story.clock.now))  # no model
    story.serve()
    story.off_the_network("m1")
    story.run_for(120)
    w = record(story.cluster, "chat").workload
    assert (w.state, w.held_reason) == (S.HELD, HeldReason.MODEL_FILES)
    copy = verified("m2", SUMMARY, sha=SMALL, name="qwen", gib=4)
    story.cluster.reports.publish(machine_report("m2", 1, copy, at=story.clock.now))
    story.tick()
    assert (state(story.cluster, "chat"), story.machine_of()) == (S.RECOVERING, "m2")
    assert record(story.cluster, "chat").model_path == copy.path


def test_the_old_machine_returning_moves_nothing_back() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.off_the_network("m1")
    seconds_until_moved(story)
    story.cluster.pods.run()
    story.back("m1")
    story.run_for(600)
    assert story.health("m1") is Health.REPORTING
    assert (state(story.cluster, "chat"), story.machine_of()) == (S.SERVING, "m2")
    assert record(story.cluster, "chat").workload.recoveries == 1


def test_most_of_the_fleet_quiet_at_once_moves_nothing_and_says_why() -> None:
    story = Story("m1", "m2", "m3")
    story.serve()
    story.off_the_network("m1", "m2")
    story.run_for(600)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.held_reason) == ("m1", HeldReason.FLEET_QUIET)
    assert any("more than half" in line for line in story.lines)


def test_batch_jobs_are_untouched() -> None:
    story = Story("m1", "m2")
    story.cluster.objects.create(WorkloadAsk(kind=BATCH, name="nightly", model="qwen"))
    story.tick()
    story.cluster.pods.run()
    story.tick()
    story.off_the_network("m1")
    story.run_for(600)
    w = record(story.cluster, "nightly").workload
    assert (w.machine, w.held_reason) == ("m1", HeldReason.BATCH_JOB)


def test_a_controller_that_was_not_watching_counts_quiet_time_only_from_when_it_watches() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.off_the_network("m1")
    story.clock.now += timedelta(hours=1)  # the controller stalled for an hour meanwhile
    story.renew()
    story.ctl.resync()
    assert story.health("m1") is Health.UNREACHABLE
    assert story.cluster.health.read()["m1"].since == story.clock.now  # not an hour ago
    waited = seconds_until_moved(story)
    assert waited >= DELAY.total_seconds()


def test_the_controller_wakes_when_a_signal_can_go_quiet_and_when_a_delay_runs_out() -> None:
    story = Story("m1", "m2")
    story.serve()
    renewed = story.clock.now
    # both machines renewed just now: the agent's 30 s grace is the first that can run out
    assert story.ctl.wake_at == renewed + timedelta(seconds=30)
    story.off_the_network("m1")
    story.run_for(50)  # m1 unreachable since renewed + 40 s; chat waits for its delay
    since = story.cluster.health.read()["m1"].since
    assert since == renewed + timedelta(seconds=40)
    assert story.ctl.wake_at == min(since + DELAY, story.clock.now + timedelta(seconds=30))


def test_a_move_decided_on_the_first_pass_that_sees_the_machine_gone_shows_no_old_endpoint() -> (
    None
):
    story = Story("m1", "m2")
    story.serve(recovery_after=timedelta(seconds=10))
    story.off_the_network("m1")
    story.tick(55)  # one late pass: unreachable since +40 s, due at +50 s
    obj = story.cluster.objects.get(SERVICE, "chat")
    assert obj is not None
    assert (state(story.cluster, "chat"), story.machine_of()) == (S.RECOVERING, "m2")
    assert obj.endpoint == ""  # never routed to m1's server, nor to m2's before it answers
    ready = obj.condition("Ready")
    assert ready is not None
    assert (ready.ok, ready.reason, ready.message) == (
        False,
        "Recovering",
        "recovering on m2: nothing is routed to it until it serves",
    )


def test_set_to_never_while_recovering_applies_to_the_next_failure_and_breaks_nothing() -> None:
    story = Story("m1", "m2", "m3")
    story.serve()
    story.off_the_network("m1")
    seconds_until_moved(story)
    assert state(story.cluster, "chat") is S.RECOVERING
    story.cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.NEVER, DELAY)
    story.tick()
    w = record(story.cluster, "chat").workload
    assert (w.state, w.recovery_mode, w.machine) == (S.RECOVERING, RecoveryMode.NEVER, "m2")
    story.cluster.pods.run()
    story.tick()
    story.off_the_network("m2")
    story.run_for(600)  # its new machine fails: it waits for it now
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.held_reason) == ("m2", HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF)


def test_a_choice_changed_in_the_spec_is_the_one_recovery_decides_by() -> None:
    story = Story("m1", "m2")
    story.serve()  # automatic after 60 s
    story.off_the_network("m1")
    story.run_for(50)  # unreachable since +40 s
    story.cluster.objects.set_recovery(SERVICE, "chat", AUTO, timedelta(minutes=10))
    story.run_for(120)  # past the old delay, well before the new one
    assert story.machine_of() == "m1"
    assert record(story.cluster, "chat").workload.recovery_after == timedelta(minutes=10)


def asks(story: Story) -> list[tuple[str, str, tuple[str, ...]]]:
    """Every copy request: machine, model name, who asks."""
    return [
        (r.machine, r.name, tuple(a.asker for a in r.askers))
        for r in story.cluster.copies.requests()
    ]


def only_on(story: Story, machine: str) -> None:
    """Only ``machine`` reports a verified copy of the model; the others report none."""
    for m, rep in story.cluster.reports.reports.items():
        kept = tuple(a for a in rep.artifacts if m == machine or a.id != SMALL)
        story.cluster.reports.publish(evolve(rep, artifacts=kept))


def test_an_automatic_service_keeps_a_verified_copy_on_another_machine_that_could_run_it() -> None:
    story = Story("m1", "m2", cards=2)
    only_on(story, "m1")
    story.serve()
    story.serve("manual", recovery=RecoveryMode.NEVER)
    assert asks(story) == [("m2", "qwen", ("recovery:chat",))]  # never: none asked for it
    copy = verified("m2", SUMMARY, sha=SMALL, name="qwen", gib=4)
    story.cluster.reports.publish(evolve(story.cluster.reports.reports["m2"], artifacts=(copy,)))
    story.run_for(30)
    assert asks(story) == [("m2", "qwen", ("recovery:chat",))]  # a copy it relies on stays
    story.cluster.objects.set_recovery(SERVICE, "chat", RecoveryMode.NEVER, DELAY)
    story.tick()
    story.tick()
    assert asks(story) == []  # taken back; the files stay where they are


def test_held_for_its_files_it_moves_once_the_machine_asked_has_checked_every_file() -> None:
    story = Story("m1", "m2")
    only_on(story, "m1")
    story.serve()
    story.off_the_network("m1")
    story.run_for(120)
    w = record(story.cluster, "chat").workload
    assert (w.state, w.held_reason) == (S.HELD, HeldReason.MODEL_FILES)
    assert asks(story) == [("m2", "qwen", ("recovery:chat",))]
    copy = verified("m2", SUMMARY, sha=SMALL, name="qwen", gib=4)  # m2's agent verified it
    story.cluster.reports.publish(evolve(story.cluster.reports.reports["m2"], artifacts=(copy,)))
    story.tick()
    assert (state(story.cluster, "chat"), story.machine_of()) == (S.RECOVERING, "m2")
