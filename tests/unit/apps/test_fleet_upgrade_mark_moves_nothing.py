"""``nodeau fleet upgrade`` on both planes, over the contract-checked fakes (the fleet:
``Story`` of tests/support/fakes/fleet_stories.py; one machine:
tests/support/fakes/machine_plane.py).
The mark is set and taken off, ``fleet list`` shows it, marking restarts and moves
nothing, and the controller moves nothing off a marked machine and nothing onto it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nodeau.adapters.sqlite_marks import SqliteMarks, marks_from_json
from nodeau.apps.cli.render import to_json
from nodeau.apps.cli.serving import fleet_lines
from nodeau.apps.machines.commands import UpgradeMark
from nodeau.apps.planes.kubernetes import KubernetesPlane
from nodeau.apps.serving.commands import Started
from nodeau.domain.health import Health
from nodeau.domain.organisation import Requester
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.cluster import UnknownMachine
from nodeau.ports.organisation import NotAllowed
from nodeau.ports.state import StateError
from tests.support.fakes.controller_fleet import fake_fleet_cluster, fleet_plane, record
from tests.support.fakes.fleet_stories import Story, seconds_until_moved
from tests.support.fakes.machine_plane import ask, plane_with
from tests.support.real.cli import Cli

SERVICE = WorkloadKind.SERVICE
KEYS = ["plane", "machine", "upgrading", "sentence"]


def marked_on(plane: KubernetesPlane) -> dict[str, bool]:
    return {m.machine: m.upgrading for m in plane.machines.listing().machines}


# -- a fleet


def test_on_a_fleet_the_mark_is_shown_by_fleet_list_and_done_takes_it_off_touching_nothing() -> (
    None
):
    story = Story("m1", "m2")
    story.serve()  # chat serves on m1
    plane = fleet_plane(story.cluster)
    server = story.cluster.pods.read(SERVICE, "chat")

    marked = plane.machines.mark_upgrading("m1", upgrading=True)
    assert marked == UpgradeMark(
        plane=plane.description,
        machine="m1",
        upgrading=True,
        sentence=(
            "m1 is marked upgrading: nothing on it moves and nothing new is placed there until "
            "nodeau fleet upgrade --node m1 --done; its 1 running workload(s) are not stopped, "
            "moved or restarted"
        ),
    )
    assert story.cluster.nodes["m1"].upgrading is True
    assert marked_on(plane) == {"m1": True, "m2": False}
    rows = fleet_lines(plane.machines.listing())[2].splitlines()
    assert rows[0].split()[:4] == ["MACHINE", "HEALTH", "DRAINED", "UPGRADING"]
    story.tick()  # the controller's pass reads the mark
    assert story.health("m1") is Health.UPGRADING
    w = record(story.cluster, "chat").workload
    assert (w.machine, w.state) == ("m1", WorkloadState.SERVING)

    cleared = plane.machines.mark_upgrading("m1", upgrading=False)
    assert cleared.sentence == (
        "m1 is no longer marked upgrading: it takes new placements again, and its workloads' "
        "recovery choices apply again if it stops answering; nothing moves now"
    )
    assert (cleared.upgrading, story.cluster.nodes["m1"].upgrading) == (False, False)
    assert marked_on(plane) == {"m1": False, "m2": False}
    story.tick()
    assert story.health("m1") is Health.REPORTING
    # the same server all along: nothing was restarted, moved or deleted
    assert story.cluster.pods.read(SERVICE, "chat") == server
    assert story.cluster.pods.forced == 0
    assert record(story.cluster, "chat").workload.recoveries == 0


def test_done_on_a_machine_not_marked_says_nothing_changed() -> None:
    story = Story("m1")
    plane = fleet_plane(story.cluster)
    cleared = plane.machines.mark_upgrading("m1", upgrading=False)
    assert cleared.sentence == "m1 was not marked upgrading; nothing changed"
    assert story.cluster.nodes["m1"].upgrading is False


def test_a_machine_the_command_marked_is_never_where_a_recovery_goes() -> None:
    unmarked = Story("m1", "m2", "m3")
    unmarked.serve()
    unmarked.off_the_network("m1")
    seconds_until_moved(unmarked)
    assert unmarked.machine_of() == "m2"  # without the mark, m2 is where it goes

    story = Story("m1", "m2", "m3")
    story.serve()
    fleet_plane(story.cluster).machines.mark_upgrading("m2", upgrading=True)
    story.off_the_network("m1")
    seconds_until_moved(story)
    assert story.machine_of() == "m3"


def test_nothing_on_a_machine_the_command_marked_moves_until_the_mark_is_taken_off() -> None:
    story = Story("m1", "m2")
    story.serve()
    plane = fleet_plane(story.cluster)
    plane.machines.mark_upgrading("m1", upgrading=True)
    story.off_the_network("m1")  # restarting for its upgrade
    story.run_for(600)  # ten times the service's recovery delay
    assert story.health("m1") is Health.UPGRADING
    assert story.machine_of() == "m1"

    plane.machines.mark_upgrading("m1", upgrading=False)  # still quiet once the mark is off
    seconds_until_moved(story)
    assert story.machine_of() == "m2"  # its recovery choice applies again


def test_a_machine_that_is_not_a_node_is_refused_and_nothing_is_marked() -> None:
    story = Story("m1")
    plane = fleet_plane(story.cluster)
    for upgrading in (True, False):
        with pytest.raises(UnknownMachine, match=r"^no machine called 'm9' in the cluster"):
            plane.machines.mark_upgrading("m9", upgrading=upgrading)
    assert story.cluster.marks.read().upgrading == frozenset()


class Alice:
    """``Identity``: the Kubernetes user the API server would say the credentials are."""

    def requester(self) -> Requester:
        return Requester(user="alice", groups=frozenset())


def test_a_person_whose_role_may_not_mark_is_refused_and_nothing_is_marked() -> None:
    story = Story("m1")
    story.cluster.organisation.document = b'{"everyone": "operator"}'
    c = story.cluster
    ports = fake_fleet_cluster(c, organisation=c.organisation, identity=Alice())
    plane = KubernetesPlane(ports, clock=c.clock)
    with pytest.raises(NotAllowed) as refused:
        plane.machines.mark_upgrading("m1", upgrading=True)
    assert refused.value.refusal.code is ReasonCode.ROLE_MAY_NOT
    assert "may not mark-upgrading" in refused.value.refusal.sentence
    assert story.cluster.nodes["m1"].upgrading is False


# -- one machine


def test_on_one_machine_the_mark_is_kept_as_drains_is_shown_and_taken_off_moving_nothing(
    tmp_path: Path,
) -> None:
    plane, parts = plane_with(tmp_path)
    assert isinstance(plane.serving.run(ask()), Started)
    started = list(parts.runtime.started)

    marked = plane.machines.mark_upgrading("m1", upgrading=True)
    assert marked == UpgradeMark(
        plane="one machine (state in SQLite, no Kubernetes)",
        machine="m1",
        upgrading=True,
        sentence=(
            "m1 is marked upgrading; on one machine nothing moves anyway, and its 1 running "
            "workload(s) are not stopped, moved or restarted"
        ),
    )
    assert plane.machines.listing().machines[0].upgrading is True
    # kept where the drained mark is: the state database's marks, read afresh
    assert SqliteMarks(parts.settings.state_path).read().upgrading == frozenset({"m1"})
    assert [v.state for v in plane.serving.workloads()] == ["serving"]

    cleared = plane.machines.mark_upgrading("m1", upgrading=False)
    assert (
        cleared.sentence == "m1 is no longer marked upgrading; on one machine nothing moves anyway"
    )
    assert plane.machines.listing().machines[0].upgrading is False
    assert SqliteMarks(parts.settings.state_path).read().upgrading == frozenset()
    assert [v.state for v in plane.serving.workloads()] == ["serving"]
    assert parts.runtime.started == started  # no server was started again


def test_on_one_machine_only_this_machine_can_be_marked(tmp_path: Path) -> None:
    plane, parts = plane_with(tmp_path)
    with pytest.raises(StateError, match=r"^no machine called 'garage' on this plane; this "):
        plane.machines.mark_upgrading("garage", upgrading=True)
    assert SqliteMarks(parts.settings.state_path).read().upgrading == frozenset()


def test_marks_kept_before_the_upgrading_mark_existed_read_as_none_upgrading() -> None:
    kept = marks_from_json('{"drained": ["m1"], "fleet_policy": "spread", "overrides": []}')
    assert (kept.drained, kept.upgrading) == (frozenset({"m1"}), frozenset())


def test_both_planes_print_the_same_json_keys(tmp_path: Path) -> None:
    story = Story("m1")
    on_fleet = fleet_plane(story.cluster).machines.mark_upgrading("m1", upgrading=True)
    one, _ = plane_with(tmp_path)
    on_one = one.machines.mark_upgrading("m1", upgrading=True)
    assert list(json.loads(to_json(on_fleet))) == list(json.loads(to_json(on_one))) == KEYS
    listed = [
        json.loads(to_json(p.machines.listing()))["machines"][0]
        for p in (fleet_plane(story.cluster), one)
    ]
    assert [m["upgrading"] for m in listed] == [True, True]
    assert list(listed[0]) == list(listed[1])


def test_the_command_marks_this_machine_and_fleet_list_shows_it(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    done = cli("fleet", "upgrade", "--node", "testbox")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "testbox is marked upgrading; on one machine nothing moves anyway, and its 0 running "
        "workload(s) are not stopped, moved or restarted"
    )
    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict) and listing["machines"][0]["upgrading"] is True
    text = cli("fleet", "list").stdout.splitlines()
    header, row = (re.split(r"\s{2,}", line) for line in text[2:4])  # columns: 2+ spaces
    assert dict(zip(header, row, strict=True))["UPGRADING"] == "yes"

    cleared = cli.json("fleet", "upgrade", "--node", "testbox", "--done")
    assert cleared == {
        "plane": "one machine (state in SQLite, no Kubernetes)",
        "machine": "testbox",
        "upgrading": False,
        "sentence": "testbox is no longer marked upgrading; on one machine nothing moves anyway",
    }
    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict) and listing["machines"][0]["upgrading"] is False
