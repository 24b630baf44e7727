"""``nodeau fleet drain``, ``undrain`` and ``set-policy`` on the fleet plane, over the
contract-checked fake cluster: the plane says what the domain's rules say (how many
workloads the mark leaves running), the cluster keeps only the mark written, and a
machine that is not a Node is refused before anything is written.
"""

from __future__ import annotations

import pytest

from nodeau.domain import marking
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.ports.cluster import UnknownMachine
from tests.support.fakes.controller_fleet import fleet_plane
from tests.support.fakes.fleet_stories import Story


def test_a_drain_says_what_it_leaves_running_and_undrain_takes_the_mark_off() -> None:
    story = Story("m1", "m2")
    story.serve()  # chat serves on m1
    plane = fleet_plane(story.cluster)

    said = plane.machines.drain("m1")
    assert said == marking.drain(frozenset(), "m1", 1).sentence
    assert "1" in said and "m1" in said
    assert story.cluster.marks.read().drained == frozenset({"m1"})
    assert story.cluster.nodes["m1"].drained_at == story.clock.now
    assert plane.machines.drain("m1") == marking.drain(frozenset({"m1"}), "m1", 1).sentence

    assert plane.machines.undrain("m1") == marking.undrain(frozenset({"m1"}), "m1").sentence
    assert story.cluster.marks.read().drained == frozenset()
    assert story.cluster.nodes["m1"].drained_at is None
    assert plane.machines.undrain("m1") == marking.undrain(frozenset(), "m1").sentence
    assert story.machine_of() == "m1"  # nothing moved


def test_a_policy_is_set_for_the_fleet_or_one_machine_and_says_what_it_leaves() -> None:
    story = Story("m1", "m2")
    story.serve()
    plane = fleet_plane(story.cluster)

    assert plane.machines.set_policy(Policy.SPREAD, None) == (
        marking.change_fleet_policy(SchedulingSettings(), Policy.SPREAD, 1).sentence
    )
    spread = SchedulingSettings(fleet_policy=Policy.SPREAD)
    assert plane.machines.set_policy(Policy.PACK, "m1") == (
        marking.set_machine_policy(spread, "m1", Policy.PACK, 1).sentence
    )
    assert story.cluster.marks.read().settings == SchedulingSettings(
        fleet_policy=Policy.SPREAD, overrides=(("m1", Policy.PACK),)
    )


def test_marks_for_a_machine_that_is_not_a_node_are_refused_and_nothing_is_written() -> None:
    story = Story("m1")
    plane = fleet_plane(story.cluster)
    before = story.cluster.marks.read()
    for mark in (
        lambda: plane.machines.drain("m9"),
        lambda: plane.machines.undrain("m9"),
        lambda: plane.machines.set_policy(Policy.SPREAD, "m9"),
    ):
        with pytest.raises(UnknownMachine, match=r"^no machine called 'm9' in the cluster"):
            mark()
    assert story.cluster.marks.read() == before
