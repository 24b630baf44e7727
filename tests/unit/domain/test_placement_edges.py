"""Placement at its edges: no candidate left and nothing excluded says "none" for where, and
ranking a candidate from outside the fleet is a programming error naming it; an empty
ledger holds no byte of any card."""

from __future__ import annotations

import pytest

from nodeau.domain.admission import AdmissionRequest, Admitted, admit
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings, place, rank
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger
from tests.unit.domain.fleets import flat, fleet, gpu, machine

CARDS = fleet(machine("m1", gpu("A")))
REQUEST = AdmissionRequest(
    workload="chat", model="qwen", artifact_id="ab" * 32, config=RuntimeConfig(context_tokens=4096)
)


def admitted() -> Admitted:
    return admit(REQUEST, CARDS, Ledger(), frozenset({"m1"}), flat(8 * GIB)).unwrap()


def test_no_covered_candidate_and_nothing_excluded_says_none_for_where() -> None:
    refusal = place(
        admitted(), CARDS, Ledger(), SchedulingSettings(), {}, covered=frozenset()
    ).failure()
    assert refusal.code is ReasonCode.NO_ELIGIBLE_MACHINE
    assert refusal.sentence == (
        "qwen was admitted, but every card that can take it is on a machine that is not a "
        "candidate: none"
    )


def test_ranking_a_candidate_from_outside_the_fleet_is_a_programming_error() -> None:
    elsewhere = fleet(machine("m2", gpu("B")))
    with pytest.raises(ValueError) as raised:
        rank(admitted().candidates, elsewhere, Ledger(), SchedulingSettings())
    assert str(raised.value) == "candidate A is on m1, which is not in the fleet"


def test_an_empty_ledger_holds_no_byte_of_any_card() -> None:
    assert Ledger().reserved_bytes("A") == 0
