"""A model larger than one card is shared out by whole slots in order: never a share over
its card, one card whenever one holds it, otherwise the fewest that do (checked against
every set and order of a few cards), and counts llama.cpp places exactly as given."""

from __future__ import annotations

from itertools import combinations, permutations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.card_split import Split, fewest_cards, slot_cards

slot_sizes = st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=10)
frees = st.lists(st.integers(min_value=0, max_value=200), min_size=1, max_size=4)
per_card = st.integers(min_value=0, max_value=30)


def llama_cpp_cards(proportions: list[int], slots: int) -> list[int]:
    """llama.cpp's ``load_tensors`` for ``--split-mode layer`` with every layer offloaded:
    cumulative split points over their total, in float32, and each slot to the first card
    whose point is greater than ``slot / slots`` (``std::upper_bound``)."""
    points = np.cumsum(np.array(proportions, dtype=np.float32), dtype=np.float32)
    points = points / np.float32(points[-1])
    return [
        int(np.searchsorted(points, np.float32(il) / np.float32(slots), side="right"))
        for il in range(slots)
    ]


def holds(slot_bytes: list[int], per: int, free: list[int], order: tuple[int, ...]) -> bool:
    """Whether the cards in ``order``, each filled as far as it goes, hold every slot."""
    start = 0
    for card in order:
        room = free[card] - per
        while start < len(slot_bytes) and room >= slot_bytes[start]:
            room -= slot_bytes[start]
            start += 1
    return start == len(slot_bytes)


def fewest_by_trying_all(slot_bytes: list[int], per: int, free: list[int]) -> int | None:
    for k in range(1, len(free) + 1):
        if any(holds(slot_bytes, per, free, o) for o in permutations(range(len(free)), k)):
            return k
    return None


@given(slot_sizes, per_card, frees)
def test_the_fewest_cards_hold_every_slot_and_no_share_is_over_its_card(
    slot_bytes: list[int], per: int, free: list[int]
) -> None:
    split = fewest_cards(slot_bytes, per, free)
    fewest = fewest_by_trying_all(slot_bytes, per, free)
    if split is None:
        assert fewest is None
        return
    assert len(split.cards) == fewest
    assert len(set(split.cards)) == len(split.cards)  # never a card twice
    assert sum(split.counts) == len(slot_bytes) and all(c > 0 for c in split.counts)
    owners = slot_cards(split.counts)
    for position, card in enumerate(split.cards):
        mine = sum(b for b, owner in zip(slot_bytes, owners, strict=True) if owner == position)
        assert split.shares[position] == per + mine <= free[card]


def fewest_of_at_least(slot_bytes: list[int], per: int, free: list[int], least: int) -> int | None:
    """The fewest cards, ``least`` or more, that hold every slot, each taking at least one:
    every order of every set of cards and every way to cut the slots among them."""
    n = len(slot_bytes)
    for k in range(least, min(len(free), n) + 1):
        for order in permutations(range(len(free)), k):
            for cuts in combinations(range(1, n), k - 1):
                bounds = (0, *cuts, n)
                spans = zip(order, bounds, bounds[1:], strict=False)
                if all(per + sum(slot_bytes[a:b]) <= free[c] for c, a, b in spans):
                    return k
    return None


@given(slot_sizes, per_card, frees)
def test_at_least_two_cards_when_asked_the_fewest_of_two_or_more(
    slot_bytes: list[int], per: int, free: list[int]
) -> None:
    split = fewest_cards(slot_bytes, per, free, min_cards=2)
    fewest = fewest_of_at_least(slot_bytes, per, free, 2)
    if split is None:
        assert fewest is None
        return
    assert len(split.cards) == fewest and fewest >= 2
    assert len(set(split.cards)) == len(split.cards)
    assert sum(split.counts) == len(slot_bytes) and all(c > 0 for c in split.counts)
    owners = slot_cards(split.counts)
    for position, card in enumerate(split.cards):
        mine = sum(b for b, owner in zip(slot_bytes, owners, strict=True) if owner == position)
        assert split.shares[position] == per + mine <= free[card]


@given(slot_sizes, per_card, frees)
def test_one_card_that_holds_it_all_is_chosen_alone(
    slot_bytes: list[int], per: int, free: list[int]
) -> None:
    whole = per + sum(slot_bytes)
    split = fewest_cards(slot_bytes, per, free)
    if any(f >= whole for f in free):
        first = next(i for i, f in enumerate(free) if f >= whole)
        assert split == Split(cards=(first,), counts=(len(slot_bytes),), shares=(whole,))


def test_a_model_two_cards_hold_takes_both_and_says_its_split() -> None:
    # 5 layers of 10 and an output layer of 15 (65), 5 per card, cards of 40 and 45 free
    split = fewest_cards([10, 10, 10, 10, 10, 15], 5, [40, 45])
    assert split == Split(cards=(0, 1), counts=(3, 3), shares=(35, 40))
    assert split.tensor_split == "3,3"
    assert fewest_cards([10, 10, 10, 10, 10, 15], 5, [30, 30]) is None


@given(st.lists(st.integers(min_value=1, max_value=120), min_size=1, max_size=8))
def test_llama_cpp_places_whole_slot_counts_exactly_as_given(counts: list[int]) -> None:
    assert llama_cpp_cards(counts, sum(counts)) == list(slot_cards(counts))


def test_a_model_with_no_slot_is_refused_as_a_mistake() -> None:
    with pytest.raises(ValueError, match=r"^a model has at least one slot \(its output layer\)$"):
        fewest_cards([], 0, [10])


def test_a_slot_of_no_bytes_is_refused_as_a_mistake() -> None:
    with pytest.raises(ValueError, match=r"^every slot holds bytes, got 0$"):
        fewest_cards([5, 0, 5], 0, [10])
