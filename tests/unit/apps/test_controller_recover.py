"""The fleet's recovery (apps/controller/recover.py) at its edges: which services are due
for a decision at all, the moment the controller wakes for one waiting out its delay, a
service whose name now means other bytes, the peaks measured on the fleet's cards, and a
service whose object is gone or whose spec no longer reads while its machine is away."""

from __future__ import annotations

from attrs import evolve

from nodeau.apps.controller.loop import Controller
from nodeau.apps.controller.reading import FleetInputs
from nodeau.apps.controller.recover import due_for_a_decision
from nodeau.domain.fleet_reports import MarkedFleet
from nodeau.domain.health import Health
from nodeau.domain.organisation import Organisation
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.workloads import (
    HeldReason,
    RecoveryMode,
    WorkloadKind,
    WorkloadState,
    ps_sentence,
)
from tests.support.builders.recovery_inputs import (
    GONE,
    REPORTING,
    record_of,
    service,
    unreachable_since,
)
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.controller_fleet import HUGE, SMALL, Measured, UnreadableObjects, record
from tests.support.fakes.fake_cluster import machine_report, verified
from tests.support.fakes.fake_runtime import SEES_A_CARD
from tests.support.fakes.fleet_stories import DELAY, Story

S = WorkloadState
AUTO, NEVER = RecoveryMode.AUTOMATIC, RecoveryMode.NEVER


def test_only_automatic_services_holding_a_card_on_an_unreachable_machine_are_due() -> None:
    due = record_of(service(name="due", machine="gone", recovery_mode=AUTO))
    others = [
        record_of(service(name="never", machine="gone", recovery_mode=NEVER)),
        record_of(
            service(
                name="job",
                kind=WorkloadKind.BATCH,
                state=S.RUNNING,
                machine="gone",
                recovery_mode=NEVER,
            )
        ),
        record_of(service(name="stopped", machine="gone", recovery_mode=AUTO, state=S.STOPPED)),
        record_of(service(name="answers", machine="here", recovery_mode=AUTO)),
        record_of(service(name="unassessed", machine="new", recovery_mode=AUTO)),
    ]
    marks = MarkedFleet(
        nodes=("gone", "here", "new"),
        drained=frozenset(),
        upgrading=frozenset(),
        control_plane=frozenset(),
        settings=SchedulingSettings(),
    )
    inputs = FleetInputs(
        reports=(),
        marks=marks,
        health={"gone": unreachable_since(GONE), "here": REPORTING},
        plan=ENTERPRISE,
        organisation=Organisation.none(),
    )
    assert due_for_a_decision([*others, due, *others], inputs) == (due,)


def test_the_controller_wakes_when_a_service_waiting_for_its_delay_is_due() -> None:
    story = Story("m1")  # one machine: no other signal can go quiet before the delay is up
    story.serve()
    story.off_the_network("m1")
    for _ in range(10):
        story.tick()
        if story.health("m1") is Health.UNREACHABLE:
            break
    since = story.cluster.health.read()["m1"].since
    assert since is not None and story.machine_of() == "m1"
    assert story.ctl.wake_at == since + DELAY


def test_a_recovery_moves_the_same_bytes_whatever_the_name_means_now() -> None:
    story = Story("m1", "m2")
    story.serve()
    assert story.machine_of() == "m1"
    # on m2, "qwen" now names a 40 GiB model no card takes; the bytes served are "qwen-old"
    old = verified("m2", SUMMARY, sha=SMALL, name="qwen-old", gib=4)
    new = verified("m2", SUMMARY, sha=HUGE, name="qwen", gib=40)
    story.cluster.reports.publish(machine_report("m2", 1, old, new, at=story.clock.now))
    story.off_the_network("m1")
    story.run_for(180)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.artifact_id) == ("m2", SMALL)


def test_a_recovery_reserves_the_peak_measured_on_the_fleets_cards() -> None:
    story = Story("m1", "m2")
    ports = evolve(story.cluster.controller_ports(), measured=Measured())
    story.ctl = Controller(ports, clock=story.clock, log=story.lines.append)
    story.serve()
    story.off_the_network("m1")
    story.run_for(180)
    assert story.machine_of() == "m2"
    reserved = [(r.workload, r.bytes) for r in story.cluster.ledger.read().reservations]
    assert reserved == [("chat", 6 * 1024**3)]


def test_a_service_whose_spec_no_longer_reads_is_not_recovered() -> None:
    story = Story("m1", "m2")
    objects = story.cluster.objects = UnreadableObjects(story.cluster)
    story.ctl = Controller(
        story.cluster.controller_ports(), clock=story.clock, log=story.lines.append
    )
    story.serve()
    objects.unreadable.add("chat")
    story.off_the_network("m1")
    story.run_for(180)
    assert story.machine_of() == "m1"


def test_a_service_whose_object_is_gone_is_not_recovered() -> None:
    story = Story("m1", "m2")
    story.serve()
    del story.cluster.objects.stored[WorkloadKind.SERVICE, "chat"]  # removed by hand
    story.off_the_network("m1")
    story.run_for(180)
    assert story.machine_of() == "m1"


def on_real_cards(story: Story) -> None:
    """Every machine of the story reports its cards as real ones its model server can use."""
    for name in story.cluster.nodes:
        rep = story.cluster.reports.reports[name]
        real = tuple(evolve(g, gpu=evolve(g.gpu, simulated=False)) for g in rep.reading.gpus)
        reading = evolve(rep.reading, gpus=real, simulated=False)
        story.cluster.reports.publish(evolve(rep, reading=reading, server=SEES_A_CARD))


def test_a_recovery_onto_a_real_card_is_made_when_a_cuda_image_is_configured() -> None:
    story = Story("m1", "m2")
    on_real_cards(story)
    story.serve()
    story.off_the_network("m1")
    story.run_for(180)
    assert story.machine_of() == "m2"
    assert story.cluster.pods.on_card[WorkloadKind.SERVICE, "chat"] is True


def test_a_service_whose_model_the_policy_no_longer_permits_is_held_not_moved() -> None:
    story = Story("m1", "m2")
    story.serve()
    story.cluster.organisation.document = b'{"limits": {"allowed_models": ["llama"]}}'
    story.off_the_network("m1")
    story.run_for(180)
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.state, w.held_reason) == ("m1", S.HELD, HeldReason.LIMITS)
    assert any("does not permit model qwen" in line for line in story.lines)
    # held for the limits, not said to wait for model files it has
    assert "verified copy" not in ps_sentence(w, story.clock.now)
