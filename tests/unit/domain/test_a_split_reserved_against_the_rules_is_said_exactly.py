"""Reserving cards in a way no decision makes is a programming error whose sentence says
which rule: a split spread over two workloads or two machines, or a workload that already
holds a split asking for other cards (the held card named is the same every time)."""

from __future__ import annotations

import pytest

from nodeau.domain.hardware import Gpu
from nodeau.domain.reservations import Ledger, Reservation, reserve_cards
from nodeau.domain.units import GIB

CARDS = tuple(Gpu(uuid=f"GPU-{i}", model="card", total_bytes=24 * GIB) for i in range(4))


def held(workload: str, machine: str, card: Gpu) -> Reservation:
    return Reservation(workload=workload, machine=machine, gpu_uuid=card.uuid, bytes=GIB)


@pytest.mark.parametrize(
    ("first", "second"),
    [(("x", "m1"), ("x", "m2")), (("x", "m1"), ("y", "m1"))],
    ids=["two machines", "two workloads"],
)
def test_a_split_is_one_workloads_on_one_machine(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    apart = [held(*first, CARDS[0]), held(*second, CARDS[1])]
    with pytest.raises(ValueError) as raised:
        reserve_cards(Ledger(), apart, CARDS[:2])
    assert str(raised.value) == "a split is one workload's, on one machine"


@pytest.mark.parametrize("order", [(2, 3), (3, 2)], ids=["in order", "reversed"])
def test_a_workload_holding_a_split_is_told_to_release_it_first(order: tuple[int, int]) -> None:
    ledger = reserve_cards(
        Ledger(), [held("big", "m1", CARDS[i]) for i in order], [CARDS[i] for i in order]
    ).unwrap()
    again = [held("big", "m1", CARDS[0]), held("big", "m1", CARDS[1])]
    with pytest.raises(ValueError) as raised:
        reserve_cards(ledger, again, CARDS[:2])
    assert str(raised.value) == "big already holds GPU-2; release it first"
