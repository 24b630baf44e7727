"""Among machines whose free cards hold a split on as few cards, each machine is scored
by its own policy (its override, else the fleet's), and pack's fullness is the share of
its cards held, not how many: as one card is placed."""

from __future__ import annotations

from nodeau.domain.hardware import Fleet
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.split_placement import place_split
from nodeau.domain.units import GIB
from tests.support.builders.split_fleets import WEIGHTS, ask, sixteens


def holding(*held: tuple[str, int]) -> Ledger:
    """A ledger where each named machine's first cards are held, that many of them."""
    return Ledger(
        reservations=tuple(
            Reservation(workload=f"w-{name}{i}", machine=name, gpu_uuid=f"GPU-{name}{i}", bytes=GIB)
            for name, count in held
            for i in range(count)
        )
    )


def test_pack_chooses_the_machine_with_the_larger_share_of_its_cards_held() -> None:
    fleet = Fleet(machines=(sixteens("a", 12), sixteens("b", 4)))
    ledger = holding(("a", 3), ("b", 2))  # a: 3 of 12 held (a quarter), b: 2 of 4 (a half)
    placed = place_split(fleet, ledger, frozenset({"a", "b"}), ask(WEIGHTS))
    assert placed is not None
    assert (placed.machine, placed.gpu_uuids) == ("b", ("GPU-b2", "GPU-b3"))


def test_a_machines_own_policy_scores_it_not_the_fleets() -> None:
    fleet = Fleet(machines=(sixteens("a", 4), sixteens("b", 4)))
    ledger = holding(("a", 1))
    spread_both = SchedulingSettings(
        fleet_policy=Policy.PACK, overrides=(("a", Policy.SPREAD), ("b", Policy.SPREAD))
    )
    placed = place_split(fleet, ledger, frozenset({"a", "b"}), ask(WEIGHTS), spread_both)
    assert placed is not None and placed.machine == "b"  # the emptier, as spread ranks
    packed = place_split(fleet, ledger, frozenset({"a", "b"}), ask(WEIGHTS))
    assert packed is not None and packed.machine == "a"  # the fleet's pack, the fuller
