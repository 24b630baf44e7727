"""``recovery set`` and ``recovery status`` on both planes, over the contract-checked fakes.

The fleet: the Kubernetes plane and the controller over one ``FakeCluster``. One machine: the
``MachinePlane`` over tests/support/fakes/machine_plane.py's fakes.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from attrs import evolve
from returns.result import Result

from nodeau.apps.cli.render import to_json
from nodeau.apps.planes.kubernetes import KubernetesPlane
from nodeau.apps.recovery.commands import NotAService
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.organisation import Requester
from nodeau.domain.records import Admission, Snapshot
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.workloads import (
    RecoveryMode,
    WorkloadKind,
    WorkloadState,
    ps_sentence,
    recovery_words,
)
from nodeau.ports.organisation import NotAllowed
from nodeau.ports.state import UnknownWorkload
from tests.support.builders.admissions import decider, fleet_of
from tests.support.builders.summaries import SUMMARY
from tests.support.fakes.controller_fleet import HUGE, START, fake_fleet_cluster, record
from tests.support.fakes.fake_cluster import machine_report, verified
from tests.support.fakes.fleet_stories import Fleet
from tests.support.fakes.machine_plane import ask, plane_with

SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
S = WorkloadState
AUTO, NEVER = RecoveryMode.AUTOMATIC, RecoveryMode.NEVER
TEN_MINUTES = timedelta(minutes=10)
LABEL = "node-role.kubernetes.io/control-plane"


# -- the fleet


def test_on_the_fleet_a_choice_goes_into_the_spec_then_the_record_and_nothing_restarts() -> None:
    f = Fleet("m1", "m2")
    f.serve()
    server = f.cluster.pods.read(SERVICE, "chat")
    said = f.plane.recovery.set_choice("chat", AUTO, TEN_MINUTES)
    assert said == (
        "chat: recovery is now automatic after 10m (was never); nothing restarts "
        "(the controller records it on its next pass)"
    )
    obj = f.cluster.objects.get(SERVICE, "chat")
    assert obj is not None and obj.ask is not None
    assert (obj.ask.recovery, obj.ask.recovery_after) == (AUTO, TEN_MINUTES)
    # status shows what was asked at once; the record follows on the controller's pass
    assert (f.row().mode, f.row().after_seconds, f.row().choice) == (
        "automatic",
        600,
        "automatic after 10m",
    )
    assert record(f.cluster, "chat").workload.recovery_mode is NEVER
    f.tick()
    w = record(f.cluster, "chat").workload
    assert (w.recovery_mode, w.recovery_after, w.state) == (AUTO, TEN_MINUTES, S.SERVING)
    assert f.cluster.events.reasons("chat").count("RecoveryChosen") == 1
    assert f.cluster.pods.read(SERVICE, "chat") == server  # the same server, untouched
    assert f.cluster.pods.forced == 0


def test_choosing_the_same_again_writes_nothing() -> None:
    f = Fleet("m1")
    f.serve(recovery=AUTO, recovery_after=TEN_MINUTES)
    version = f.cluster.objects.stored[SERVICE, "chat"].version
    said = f.plane.recovery.set_choice("chat", AUTO, TEN_MINUTES)
    assert said == f"chat: recovery is already {recovery_words(AUTO, TEN_MINUTES)}; nothing changed"
    assert f.cluster.objects.stored[SERVICE, "chat"].version == version


class Alice:
    """``Identity``: the Kubernetes user the API server would say the credentials are."""

    def requester(self) -> Requester:
        return Requester(user="alice", groups=frozenset())


def plane_as_alice(f: Fleet, policy: bytes) -> KubernetesPlane:
    """The plane the CLI uses on ``f``, for alice, under the organisation's ``policy``."""
    c = f.cluster
    c.organisation.document = policy
    ports = fake_fleet_cluster(c, organisation=c.organisation, identity=Alice())
    return KubernetesPlane(ports, clock=c.clock)


def test_on_the_fleet_only_a_role_that_may_set_recovery_sets_it() -> None:
    f = Fleet("m1")
    f.serve()
    viewer = plane_as_alice(f, b'{"everyone": "viewer"}')
    with pytest.raises(NotAllowed) as refused:
        viewer.recovery.set_choice("chat", AUTO, TEN_MINUTES)
    assert refused.value.refusal.code is ReasonCode.ROLE_MAY_NOT
    assert "may not set-recovery" in refused.value.refusal.sentence
    assert f.row().mode == "never"
    operator = plane_as_alice(f, b'{"everyone": "operator"}')
    operator.recovery.set_choice("chat", AUTO, TEN_MINUTES)
    assert f.row().mode == "automatic"


def test_on_the_fleet_a_batch_job_has_no_recovery_and_an_unknown_name_is_unknown() -> None:
    f = Fleet("m1")
    job = WorkloadAsk(kind=BATCH, name="nightly", model="qwen")
    f.cluster.objects.create(job)
    with pytest.raises(NotAService) as refused:
        f.plane.recovery.set_choice("nightly", AUTO, TEN_MINUTES)
    assert (
        refused.value.one_line() == "recovery applies to served workloads; nightly is a batch job"
    )
    found = f.cluster.objects.get(BATCH, "nightly")
    assert found is not None and found.ask == job
    with pytest.raises(UnknownWorkload, match=r"^no workload called 'nope' in the cluster"):
        f.plane.recovery.set_choice("nope", AUTO, TEN_MINUTES)
    assert [v.name for v in f.plane.recovery.status().services] == []  # batch jobs are not listed


def test_fleet_status_names_the_copies_each_machine_reports_and_the_control_plane() -> None:
    f = Fleet("m1", "m2")
    f.cluster.add_node("m3")  # a machine with room but no copy of qwen
    giant = verified("m3", SUMMARY, sha=HUGE, name="giant", gib=40)
    f.cluster.reports.publish(machine_report("m3", 1, giant, at=START))
    f.serve()
    f.cluster.objects.create(WorkloadAsk(kind=SERVICE, name="later", model="qwen"))  # undecided
    listing = f.plane.recovery.status()
    assert listing.plane == f.plane.description
    assert listing.control_plane == (
        f"no machine is marked control plane (no node carries label {LABEL}), "
        "so no workload waits for the machine that decides"
    )
    chat, later = listing.services
    assert (chat.name, chat.machine, chat.state) == ("chat", "m1", "serving")
    assert chat.copies == ("m1", "m2")
    assert (chat.choice, chat.mode, chat.after_seconds) == ("never", "never", 180)
    assert (chat.last_recovery, chat.sentence, chat.note) == (None, None, None)
    assert (later.machine, later.state, later.copies) == (None, "pending", None)


def test_an_automatic_service_on_the_control_plane_machine_is_said_to_wait_for_it() -> None:
    f = Fleet("m1", "m2")
    f.cluster.nodes["m1"].control_plane = True
    f.serve(recovery=AUTO)
    listing = f.plane.recovery.status()
    assert (
        listing.control_plane == f"the control-plane machine is m1 (its node carries label {LABEL})"
    )
    assert f.row().note == (
        "m1 is the control-plane machine, which makes the decision: chat waits for it if it "
        "stops answering"
    )
    f.cluster.nodes["m2"].control_plane = True
    assert f.plane.recovery.status().control_plane.startswith(
        "the control-plane machines are m1, m2 ("
    )


def test_a_recovered_service_shows_its_last_recovery_and_while_held_its_sentence() -> None:
    f = Fleet("m1", "m2")
    f.serve(recovery=AUTO, recovery_after=timedelta(seconds=60))
    f.quiet.add("m1")
    held = None
    for _ in range(30):
        f.tick()
        w = record(f.cluster, "chat").workload
        if w.state is S.HELD and held is None:
            held = f.row()
            assert held.sentence == ps_sentence(w, f.clock.now)
            assert held.sentence.startswith("held since ")
        if w.machine == "m2":
            break
    assert held is not None, "chat was never held before it moved"
    moved = record(f.cluster, "chat").workload
    assert (moved.state, moved.machine) == (S.RECOVERING, "m2")
    row = f.row()
    assert row.machine == "m2" and row.sentence == ps_sentence(moved, f.clock.now)
    assert moved.last_recovery is not None and row.last_recovery is not None
    assert (row.last_recovery.from_machine, row.last_recovery.to_machine) == ("m1", "m2")
    assert row.last_recovery.at == moved.last_recovery.at
    assert row.last_recovery.sentence == moved.last_recovery.sentence
    f.cluster.pods.run()
    f.tick()
    settled = f.row()
    assert (settled.state, settled.sentence) == ("serving", None)  # served again: no sentence
    assert settled.last_recovery == row.last_recovery  # the last recovery stays to be read


# -- one machine


def test_on_one_machine_the_choice_is_recorded_and_nothing_restarts(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    plane.serving.run(ask())
    before = parts.state.snapshot().named("tiny")
    assert before is not None
    said = plane.recovery.set_choice("tiny", AUTO, TEN_MINUTES)
    assert said == "tiny: recovery is now automatic after 10m (was never); nothing restarts"
    after = parts.state.snapshot().named("tiny")
    assert after is not None
    assert (after.workload.recovery_mode, after.workload.recovery_after) == (AUTO, TEN_MINUTES)
    assert after.server == before.server and after.workload.state is before.workload.state
    assert len(parts.runtime.started) == 1 and parts.endpoints.running == {"tiny": 18001}
    assert parts.state.events("tiny")[-1].text == "recovery automatic after 10m; nothing restarts"
    again = plane.recovery.set_choice("tiny", AUTO, TEN_MINUTES)
    assert again.endswith("nothing changed")


def test_one_machine_status_says_there_is_nowhere_to_move_an_automatic_service(
    tmp_path: Path,
) -> None:
    plane, _ = plane_with(tmp_path, cards="2 x 24 GiB")
    plane.serving.run(ask(name="kept"))
    plane.serving.run(evolve(ask(name="moving"), recovery=AUTO, recovery_after=TEN_MINUTES))
    listing = plane.recovery.status()
    assert listing.plane == plane.description
    assert listing.control_plane.startswith("m1 is the only machine on this plane")
    kept, moving = listing.services
    assert (kept.name, kept.choice, kept.note, kept.copies) == ("kept", "never", None, None)
    assert (moving.choice, moving.mode, moving.after_seconds) == (
        "automatic after 10m",
        "automatic",
        600,
    )
    assert moving.note == "this machine is the only one: recovery has nowhere to move it"
    assert (moving.machine, moving.state, moving.last_recovery) == ("m1", "serving", None)
    plane.serving.stop("kept", workload=True)
    assert [v.name for v in plane.recovery.status().services] == ["moving"]  # a stopped one is gone


def test_on_one_machine_a_batch_job_is_refused_and_unknown_names_are_unknown(
    tmp_path: Path,
) -> None:
    plane, parts = plane_with(tmp_path)
    decide = decider("nightly", fleet_of(1), START)

    def as_batch(snapshot: Snapshot) -> Result[Admission, Refusal]:
        return decide(snapshot).map(
            lambda a: evolve(
                a, record=evolve(a.record, workload=evolve(a.record.workload, kind=BATCH))
            )
        )

    parts.state.admit("nightly", as_batch)
    with pytest.raises(NotAService, match=r"^recovery applies to served workloads; nightly is a"):
        plane.recovery.set_choice("nightly", AUTO, TEN_MINUTES)
    nightly = parts.state.snapshot().named("nightly")
    assert nightly is not None and nightly.workload.recovery_mode is NEVER
    with pytest.raises(UnknownWorkload, match=r"^no workload called 'nope'; nodeau ps lists them$"):
        plane.recovery.set_choice("nope", AUTO, TEN_MINUTES)
    plane.serving.run(ask())
    plane.serving.stop("tiny", workload=True)
    with pytest.raises(UnknownWorkload):  # stopped: it holds no card and has no choice to keep
        plane.recovery.set_choice("tiny", AUTO, TEN_MINUTES)


# -- both


def test_both_planes_print_the_same_json_keys(tmp_path: Path) -> None:
    f = Fleet("m1")
    f.serve(recovery=AUTO)
    plane, _ = plane_with(tmp_path)
    plane.serving.run(evolve(ask(), recovery=AUTO))
    fleet_doc = json.loads(to_json(f.plane.recovery.status()))
    machine_doc = json.loads(to_json(plane.recovery.status()))
    assert fleet_doc.keys() == machine_doc.keys()
    assert fleet_doc["services"][0].keys() == machine_doc["services"][0].keys()
    assert machine_doc["services"][0]["copies"] is None  # one machine cannot say
    assert fleet_doc["services"][0]["copies"] == ["m1"]
