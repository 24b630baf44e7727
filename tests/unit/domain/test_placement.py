"""Placement: pack and spread, per-machine overrides, exclusions, and the why."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.admission import AdmissionRequest, Admitted, admit
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import (
    Policy,
    SchedulingSettings,
    machine_score,
    place,
    rank,
)
from nodeau.domain.refusals import ReasonCode, RefusalKind
from nodeau.domain.reservations import Ledger, Reservation, over_committed, reserve
from tests.support.builders.fleets import flat, fleet, fleets, gpu, machine, request

PACK = SchedulingSettings(fleet_policy=Policy.PACK)
SPREAD = SchedulingSettings(fleet_policy=Policy.SPREAD)

# garage: 4 cards, 2 held; attic: 2 cards, none held; shed: 1 card, 24 GiB
FLEET = fleet(
    machine("garage", gpu("G1", 24), gpu("G2", 24), gpu("G3", 24), gpu("G4", 48)),
    machine("attic", gpu("A1", 48), gpu("A2", 24)),
    machine("shed", gpu("S1", 24)),
)
LEDGER = Ledger(
    reservations=(
        Reservation(workload="x", machine="garage", gpu_uuid="G1", bytes=GIB),
        Reservation(workload="y", machine="garage", gpu_uuid="G2", bytes=GIB),
    )
)
ALL = frozenset({"garage", "attic", "shed"})


def placed(settings: SchedulingSettings, excluded: dict[str, str] | None = None, need: int = 10):
    admitted = admit(request(), FLEET, LEDGER, ALL, flat(need * GIB)).unwrap()
    return place(admitted, FLEET, LEDGER, settings, excluded or {})


@pytest.mark.parametrize(
    ("policy", "held", "cards", "score"),
    [
        (Policy.PACK, 0, 4, Fraction(0)),
        (Policy.PACK, 3, 4, Fraction(3, 4)),
        (Policy.SPREAD, 0, 4, Fraction(1)),
        (Policy.SPREAD, 3, 4, Fraction(1, 4)),
    ],
)
def test_machine_score(policy: Policy, held: int, cards: int, score: Fraction) -> None:
    assert machine_score(policy, held, cards) == score


def test_pack_fills_the_fullest_machine_with_its_smallest_fitting_card() -> None:
    p = placed(PACK).unwrap()
    assert (p.machine, p.gpu_uuid, p.policy) == ("garage", "G3", Policy.PACK)
    assert p.reservation == Reservation(
        workload="svc", machine="garage", gpu_uuid="G3", bytes=10 * GIB
    )
    assert [r.gpu_uuid for r in p.ranked] == ["G3", "G4", "A2", "S1", "A1"]
    assert p.why == (
        "pack: garage already holds 2 of its 4 cards, the fullest machine with a card that fits; "
        "G3 (24.00 GiB) is the smallest free card there that takes 10.00 GiB; "
        "4 other candidate(s) ranked below"
    )


def test_spread_prefers_the_emptiest_machine() -> None:
    p = placed(SPREAD).unwrap()
    assert (p.machine, p.gpu_uuid) == ("attic", "A2")
    assert [r.gpu_uuid for r in p.ranked] == ["A2", "S1", "A1", "G3", "G4"]
    assert p.why.startswith("spread: attic holds 0 of its 2 cards, the emptiest machine")


def test_big_models_go_to_the_big_cards() -> None:
    p = placed(PACK, need=30).unwrap()
    assert (p.machine, p.gpu_uuid) == ("garage", "G4")


def test_per_machine_override_changes_only_that_machine() -> None:
    # spread fleet-wide, attic packs: garage scores 1/2 (spread), attic 0 (pack), shed 1
    settings = SchedulingSettings(fleet_policy=Policy.SPREAD, overrides=(("attic", Policy.PACK),))
    assert settings.policy_for("attic") is Policy.PACK
    assert settings.policy_for("garage") is Policy.SPREAD
    p = placed(settings).unwrap()
    # attic packs: empty so scores 0; shed spreads: empty so scores 1
    assert (p.machine, p.gpu_uuid, p.policy) == ("shed", "S1", Policy.SPREAD)


def test_drained_and_excluded_machines_are_never_candidates() -> None:
    p = placed(PACK, {"garage": "drained"}).unwrap()
    assert p.machine != "garage"
    assert p.excluded == (("garage", "drained"),)
    assert [r.machine for r in p.ranked] == ["attic", "shed", "attic"]


def test_nowhere_eligible_is_a_capacity_refusal_naming_each_machine() -> None:
    refusal = placed(
        PACK, {"garage": "drained", "attic": "unreachable", "shed": "drained"}
    ).failure()
    assert refusal.kind is RefusalKind.CAPACITY
    assert refusal.code is ReasonCode.NO_ELIGIBLE_MACHINE
    assert refusal.sentence == (
        "qwen was admitted, but every card that can take it is on a machine that is not a "
        "candidate: attic (unreachable), garage (drained), shed (drained)"
    )


def test_listing_order_never_changes_the_choice() -> None:
    reordered = Fleet(machines=tuple(reversed(FLEET.machines)))
    for settings in (PACK, SPREAD):
        a = placed(settings).unwrap()
        admitted = admit(request(), reordered, LEDGER, ALL, flat(10 * GIB)).unwrap()
        b = place(admitted, reordered, LEDGER, settings, {}).unwrap()
        assert (a.machine, a.gpu_uuid) == (b.machine, b.gpu_uuid)


@given(
    fleets(),
    st.lists(st.integers(1, 90), max_size=12),
    st.sampled_from(list(Policy)),
    st.data(),
)
def test_admitting_and_placing_in_sequence_never_over_commits(
    f: Fleet, needs: list[int], policy: Policy, data: st.DataObject
) -> None:
    names = [m.name for m in f.machines]
    drained = frozenset(data.draw(st.lists(st.sampled_from(names), max_size=2)))
    settings = SchedulingSettings(fleet_policy=policy)
    ledger = Ledger()
    for i, need in enumerate(needs):
        match admit(request(f"w{i}"), f, ledger, frozenset(names), flat(need * GIB)):
            case Failure(refusal):
                assert refusal.kind is RefusalKind.CAPACITY
                continue
            case Success(a):
                pass
        match place(a, f, ledger, settings, {m: "drained" for m in drained}):
            case Failure(refusal):
                assert refusal.code is ReasonCode.NO_ELIGIBLE_MACHINE
                assert {c.machine for c in a.candidates} <= drained
            case Success(p):
                assert p.machine not in drained
                assert p.gpu_uuid in {c.gpu_uuid for c in a.candidates}
                located = f.locate(p.gpu_uuid)
                assert located is not None
                ledger = reserve(ledger, p.reservation, located[1]).unwrap()
        assert over_committed(ledger, f) == ()


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
