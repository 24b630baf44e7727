"""The reservation ledger: one workload per card, never over a card's memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB
from nodeau.domain.refusals import ReasonCode, RefusalKind
from nodeau.domain.reservations import (
    Ledger,
    Reservation,
    free_bytes,
    over_committed,
    release,
    release_finished,
    reserve,
)
from tests.support.builders.fleets import fleet, fleets, gpu, machine

CARD = gpu("GPU-a", 24)


def res(workload: str, uuid: str = "GPU-a", size: int = 10 * GIB, host: str = "m") -> Reservation:
    return Reservation(workload=workload, machine=host, gpu_uuid=uuid, bytes=size)


def test_reserve_records_and_free_drops_to_zero() -> None:
    ledger = reserve(Ledger(), res("w1"), CARD).unwrap()
    assert ledger.reservations == (res("w1"),)
    assert ledger.holder("GPU-a") == res("w1")
    assert ledger.reserved_bytes("GPU-a") == 10 * GIB
    assert free_bytes(ledger, CARD) == 0  # held by one workload: nothing left to share
    assert free_bytes(Ledger(), CARD) == 24 * GIB


def test_a_held_card_refuses_a_second_workload() -> None:
    ledger = reserve(Ledger(), res("w1", size=GIB), CARD).unwrap()
    refusal = reserve(ledger, res("w2", size=GIB), CARD).failure()
    assert refusal.kind is RefusalKind.CAPACITY
    assert refusal.code is ReasonCode.CARD_HELD
    assert refusal.sentence == (
        "GPU-a on m is held by w1; a card is held by one workload at a time"
    )


def test_too_large_a_reservation_is_refused() -> None:
    refusal = reserve(Ledger(), res("w1", size=25 * GIB), CARD).failure()
    assert refusal.code is ReasonCode.CARD_TOO_SMALL
    assert refusal.sentence == "w1 needs 25.00 GiB but GPU-a has 24.00 GiB"
    exact = reserve(Ledger(), res("w1", size=24 * GIB), CARD).unwrap()
    assert exact.reserved_bytes("GPU-a") == 24 * GIB


def test_reserving_the_same_again_changes_nothing_and_another_card_is_an_error() -> None:
    ledger = reserve(Ledger(), res("w1"), CARD).unwrap()
    assert reserve(ledger, res("w1"), CARD).unwrap() == ledger
    with pytest.raises(ValueError, match="already holds GPU-a"):
        reserve(ledger, res("w1", uuid="GPU-b"), gpu("GPU-b"))
    with pytest.raises(ValueError, match="checked against"):
        reserve(Ledger(), res("w1", uuid="GPU-b"), CARD)


def test_release_frees_only_that_workload() -> None:
    b = gpu("GPU-b")
    ledger = reserve(reserve(Ledger(), res("w1"), CARD).unwrap(), res("w2", "GPU-b"), b).unwrap()
    after = release(ledger, "w1")
    assert after.reservations == (res("w2", "GPU-b"),)
    assert release(after, "nobody") == after


def test_a_workload_pulling_its_image_keeps_its_reservation() -> None:
    ledger = Ledger(reservations=(res("pulling"), res("done", "GPU-b"), res("serving", "GPU-c")))
    kept = release_finished(ledger, holding=["pulling", "serving"])
    assert [r.workload for r in kept.reservations] == ["pulling", "serving"]


def test_reservation_must_hold_bytes() -> None:
    with pytest.raises(ValueError, match="positive"):
        res("w", size=0)


def test_over_committed_names_bad_cards() -> None:
    f = fleet(machine("m", gpu("GPU-a", 24), gpu("GPU-b", 24), gpu("GPU-c", 24)))
    two = Ledger(reservations=(res("w1", size=GIB), res("w2", size=GIB)))
    big = Ledger(reservations=(res("w3", "GPU-b", size=25 * GIB),))
    fine = Ledger(reservations=(res("w4", "GPU-c", size=24 * GIB),))
    assert over_committed(two, f) == ("GPU-a",)
    assert over_committed(big, f) == ("GPU-b",)
    assert over_committed(fine, f) == ()


ops = st.lists(
    st.tuples(st.booleans(), st.integers(0, 9), st.integers(0, 30), st.integers(1, 100)),
    max_size=40,
)


@given(fleets(), ops)
def test_reserve_and_release_follow_a_model_of_the_cards(
    f: Fleet, steps: list[tuple[bool, int, int, int]]
) -> None:
    """Against a model kept in the test: a dict from each card to the one workload holding it.

    A reservation is accepted exactly when its card is free and large enough (or the
    workload already holds exactly it), refused as held or too small otherwise; the
    ledger always holds what the model holds, so no card is ever over-committed.
    """
    cards = [g for _m, g in f.gpus]
    size = {g.uuid: g.total_bytes for g in cards}
    ledger, model = Ledger(), dict[str, Reservation]()  # card uuid -> its reservation
    for is_reserve, who, card_index, gib in steps:
        name = f"w{who}"
        held = next((r for r in model.values() if r.workload == name), None)
        if is_reserve and cards:
            card = cards[card_index % len(cards)]
            host = next(m.name for m in f.machines if card in m.gpus)
            attempt = Reservation(workload=name, machine=host, gpu_uuid=card.uuid, bytes=gib * GIB)
            if held not in (None, attempt):
                continue  # one card per workload: the caller releases first
            outcome = reserve(ledger, attempt, card)
            if held == attempt:
                assert outcome.unwrap() == ledger
            elif card.uuid in model:
                assert outcome.failure().code is ReasonCode.CARD_HELD
            elif gib * GIB > size[card.uuid]:
                assert outcome.failure().code is ReasonCode.CARD_TOO_SMALL
            else:
                model[card.uuid] = attempt
                ledger = outcome.unwrap()
        else:
            if held is not None:
                del model[held.gpu_uuid]
            ledger = release(ledger, name)
        assert sorted(ledger.reservations, key=repr) == sorted(model.values(), key=repr)
        for r in ledger.reservations:
            assert r.bytes <= size[r.gpu_uuid]
        assert len({r.gpu_uuid for r in ledger.reservations}) == len(ledger.reservations)
        assert over_committed(ledger, f) == ()


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=40),  # the card
            st.integers(min_value=0, max_value=6),  # the workload
            st.integers(min_value=0, max_value=3),  # the machine
        ),
        max_size=60,
    )
)
def test_a_ledger_made_one_reservation_at_a_time_answers_as_one_made_at_once(
    drawn: list[tuple[int, int, int]],
) -> None:
    made = Ledger()
    made.holder("GPU-0")  # its lookups made, then carried through every added one
    for card, workload, on in drawn:
        made = made.added(
            Reservation(
                workload=f"w{workload}", machine=f"m{on}", gpu_uuid=f"GPU-{card}", bytes=GIB
            )
        )
    at_once = Ledger(reservations=made.reservations)
    for card in range(41):
        assert made.holder(f"GPU-{card}") == at_once.holder(f"GPU-{card}")
        assert made.reserved_bytes(f"GPU-{card}") == at_once.reserved_bytes(f"GPU-{card}")
    for workload in range(7):
        assert made.of_workload(f"w{workload}") == at_once.of_workload(f"w{workload}")
    for on in range(4):
        assert made.on_machine(f"m{on}") == at_once.on_machine(f"m{on}")


def test_a_ledger_holding_a_workload_twice_answers_its_first_reservation() -> None:
    first = Reservation(workload="w", machine="m1", gpu_uuid="GPU-1", bytes=GIB)
    second = Reservation(workload="w", machine="m2", gpu_uuid="GPU-2", bytes=GIB)
    read = Ledger(reservations=(first, second))
    assert read.of_workload("w") == first
    assert (
        read.added(
            Reservation(workload="x", machine="m1", gpu_uuid="GPU-3", bytes=GIB)
        ).of_workload("w")
        == first
    )
