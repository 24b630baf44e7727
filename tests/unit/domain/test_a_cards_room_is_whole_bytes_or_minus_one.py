"""The most a card takes before its margin is a whole number of bytes, the largest whose
total with its margin fits; -1 when not even the margin's floor fits."""

from __future__ import annotations

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import room
from nodeau.domain.units import GIB, MIB


def test_a_percentage_margin_leaves_the_largest_whole_subtotal_that_fits() -> None:
    ten_percent = Allowances(margin_percent=10, margin_floor_bytes=0)
    assert room(1000, ten_percent) == 909  # 909 + 91 = 1000; 910 + 91 = 1001
    assert room(80 * GIB, Allowances()) == 78_090_314_472  # 80 GiB x 100 / 110, rounded down


def test_a_floor_margin_leaves_what_is_past_the_floor() -> None:
    assert room(300 * MIB, Allowances()) == 44 * MIB  # the 256 MiB floor is above 10%
    assert room(256 * MIB, Allowances()) == 0


def test_a_card_smaller_than_the_margins_floor_has_no_room() -> None:
    assert room(100 * MIB, Allowances()) == -1
    assert room(0, Allowances(margin_floor_bytes=1)) == -1
