"""A workload split across cards reserves every card in one step or none: never a card held
twice, never a share over its card, a refusal leaves the ledger as it was, asking again for
the same cards changes nothing, and a release frees them together."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.pipeline import is_successful

from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation, over_committed, release, reserve_cards
from nodeau.domain.units import GIB

CARDS = tuple(Gpu(uuid=f"GPU-{i}", model="card", total_bytes=(24, 48, 80)[i % 3] * GIB)
              for i in range(6))  # fmt: skip
FLEET = Fleet(machines=(Machine(name="m1", gpus=CARDS),))


@st.composite
def asks(draw: st.DrawFn) -> tuple[Ledger, list[Reservation], list[Gpu]]:
    held = draw(st.lists(st.sampled_from(CARDS), unique=True, max_size=3))
    ledger = Ledger(reservations=tuple(
        Reservation(workload=f"other-{g.uuid}", machine="m1", gpu_uuid=g.uuid, bytes=GIB)
        for g in held))  # fmt: skip
    cards = draw(st.lists(st.sampled_from(CARDS), unique=True, min_size=1, max_size=4))
    shares = [draw(st.integers(1, 90)) * GIB for _ in cards]
    reservations = [
        Reservation(workload="split", machine="m1", gpu_uuid=g.uuid, bytes=b)
        for g, b in zip(cards, shares, strict=True)
    ]
    return ledger, reservations, cards


@given(asks())
def test_every_card_is_held_or_none_is(ask: tuple[Ledger, list[Reservation], list[Gpu]]) -> None:
    ledger, reservations, cards = ask
    done = reserve_cards(ledger, reservations, cards)
    fits = all(
        ledger.holder(g.uuid) is None and r.bytes <= g.total_bytes
        for r, g in zip(reservations, cards, strict=True)
    )
    if not fits:
        assert not is_successful(done)
        assert done.failure().code in (ReasonCode.CARD_HELD, ReasonCode.CARD_TOO_SMALL)
        return
    after = done.unwrap()
    assert over_committed(after, FLEET) == ()
    assert {r.gpu_uuid for r in after.reservations if r.workload == "split"} == {
        g.uuid for g in cards
    }
    assert (
        reserve_cards(after, list(reversed(reservations)), list(reversed(cards))).unwrap() is after
    )
    assert release(after, "split").reservations == ledger.reservations


def test_the_first_card_that_cannot_be_held_says_why() -> None:
    ledger = Ledger(reservations=(
        Reservation(workload="chat", machine="m1", gpu_uuid="GPU-1", bytes=GIB),))  # fmt: skip
    ask = [Reservation(workload="big", machine="m1", gpu_uuid=g.uuid, bytes=20 * GIB)
           for g in CARDS[:3]]  # fmt: skip
    refused = reserve_cards(ledger, ask, list(CARDS[:3]))
    assert refused.failure().code is ReasonCode.CARD_HELD
    assert "GPU-1 on m1 is held by chat" in refused.failure().sentence


def test_a_split_is_one_workloads_on_one_machine_and_names_each_card_once() -> None:
    a, b = CARDS[:2]
    with pytest.raises(ValueError, match="one workload's, on one machine"):
        apart = [
            Reservation(workload="x", machine="m1", gpu_uuid=a.uuid, bytes=GIB),
            Reservation(workload="x", machine="m2", gpu_uuid=b.uuid, bytes=GIB),
        ]
        reserve_cards(Ledger(), apart, [a, b])
    with pytest.raises(ValueError, match="names a card twice"):
        twice = Reservation(workload="x", machine="m1", gpu_uuid=a.uuid, bytes=GIB)
        reserve_cards(Ledger(), [twice, twice], [a, a])
    with pytest.raises(ValueError, match="1 reservations for 2 cards"):
        reserve_cards(Ledger(), [twice], [a, b])
    held = reserve_cards(Ledger(), [twice], [a]).unwrap()
    other = Reservation(workload="x", machine="m1", gpu_uuid=b.uuid, bytes=GIB)
    with pytest.raises(ValueError, match="x already holds GPU-0; release it first"):
        reserve_cards(held, [other], [b])
