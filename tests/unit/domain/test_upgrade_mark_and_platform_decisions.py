"""The domain's two decisions behind the fleet edges: what marking a machine upgrading (or
taking the mark off) changes and says, and which platform may be a fleet node."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.marking import clear_upgrading, mark_upgrading
from nodeau.domain.platforms import Serving, how_served, join_refusal

names = st.frozensets(st.sampled_from(["m1", "m2", "m3", "garage"]), max_size=4)


@given(marked=names, machine=st.sampled_from(["m1", "garage"]), alone=st.booleans())
def test_marking_adds_only_that_machine_and_clearing_removes_only_it(
    marked: frozenset[str], machine: str, alone: bool
) -> None:
    assert mark_upgrading(marked, machine, 0, alone=alone).upgrading == marked | {machine}
    assert clear_upgrading(marked, machine, alone=alone).upgrading == marked - {machine}


@pytest.mark.parametrize("alone", [True, False])
def test_the_mark_says_what_runs_there_is_not_stopped_moved_or_restarted(alone: bool) -> None:
    said = mark_upgrading(frozenset(), "m1", 2, alone=alone).sentence
    assert said.startswith("m1 is marked upgrading")
    assert said.endswith("its 2 running workload(s) are not stopped, moved or restarted")
    # one machine: nothing moves anyway; a fleet: nothing moves or is placed there
    assert ("on one machine nothing moves anyway" in said) is alone
    assert ("nothing on it moves and nothing new is placed there" in said) is not alone


def test_taking_off_a_mark_that_is_not_there_says_nothing_changed() -> None:
    for alone in (True, False):
        change = clear_upgrading(frozenset({"m2"}), "m1", alone=alone)
        assert change.sentence == "m1 was not marked upgrading; nothing changed"
        assert change.upgrading == frozenset({"m2"})


@pytest.mark.parametrize(
    ("platform", "fleet_node"),
    [("darwin", False), ("linux", True)],
)
def test_only_a_mac_is_never_a_fleet_node(platform: str, fleet_node: bool) -> None:
    assert how_served(platform).fleet_node is fleet_node
    assert (join_refusal(platform) is None) is fleet_node
    if not fleet_node:
        assert "standalone, on its own execution plane" in how_served(platform).sentence


def test_how_each_platform_is_served_is_said_in_full() -> None:
    assert how_served("darwin") == Serving(
        platform="darwin",
        fleet_node=False,
        sentence="standalone, on its own execution plane: a Mac is never a node of a fleet "
        "(nodeau join refuses)",
    )
    assert how_served("linux") == Serving(
        platform="linux",
        fleet_node=True,
        sentence="on its own (a fleet of one), or as a node of a fleet on Kubernetes once it "
        "joins one (nodeau join)",
    )


def test_a_mac_joining_a_fleet_is_refused_in_full() -> None:
    assert join_refusal("darwin") == (
        "a Mac is never a node of a fleet: it runs standalone, on its own execution plane "
        "(nodeau run serves models here as it is); nothing was run or written"
    )


def test_taking_off_a_mark_says_in_full_what_changes() -> None:
    marked = frozenset({"m1"})
    assert clear_upgrading(marked, "m1", alone=True).sentence == (
        "m1 is no longer marked upgrading; on one machine nothing moves anyway"
    )
    assert clear_upgrading(marked, "m1", alone=False).sentence == (
        "m1 is no longer marked upgrading: it takes new placements again, and its "
        "workloads' recovery choices apply again if it stops answering; nothing moves now"
    )
