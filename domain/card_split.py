"""A model's layers shared out between cards of one machine for llama.cpp's layer split: each
card takes whole slots in order (the output layer is the last slot), passed as
``--tensor-split`` counts, and the fewest cards whose every share fits are chosen.

Why it is so: docs/adr/0031-one-workload-across-cards.md.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

from attrs import field, frozen

from nodeau.domain.checks import not_negative


@frozen(kw_only=True)
class LayerWeights:
    """Where a file's weight bytes lie for the layer split: the input layer (the token
    embeddings, kept in host memory), each repeating layer in order, and the output layer
    (with a copy of the embeddings where the file ties the two)."""

    input_bytes: int = field(validator=not_negative)
    layer_bytes: tuple[int, ...]
    output_bytes: int = field(validator=not_negative)

    @property
    def slot_bytes(self) -> tuple[int, ...]:
        """The split's slots in order: every repeating layer, then the output layer."""
        return (*self.layer_bytes, self.output_bytes)


@frozen(kw_only=True)
class Split:
    """Which cards (indices into the cards asked about, in the order the slots run) take how
    many slots, and each card's share in bytes."""

    cards: tuple[int, ...]
    counts: tuple[int, ...]
    shares: tuple[int, ...]

    @property
    def tensor_split(self) -> str:
        """llama-server's ``--tensor-split`` for these cards, in ``CUDA_VISIBLE_DEVICES``'s
        order: whole slot counts place exactly these slots on each card."""
        return ",".join(str(c) for c in self.counts)


def slot_cards(counts: Sequence[int]) -> tuple[int, ...]:
    """The position of the card each slot goes to, for whole slot counts in order."""
    return tuple(i for i, c in enumerate(counts) for _ in range(c))


def fewest_cards(
    slot_bytes: Sequence[int], per_card_bytes: int, free: Sequence[int], min_cards: int = 1
) -> Split | None:
    """The fewest of the cards with ``free`` bytes that hold every slot in order, each card's
    share (``per_card_bytes`` plus its slots') within its free bytes; None when no set does.
    Among as few cards, one card that holds it all is the first such card in the order given
    (a caller orders the cards by its placement policy), and two are the first such pair. Of
    three or more, the search keeps for each mix of card sizes only the order carrying the
    slots furthest so far, so an earlier order that would also hold it can be passed over.
    ``min_cards``: at least that many (each card before the last leaves a slot for each
    card after it)."""
    if not slot_bytes:
        raise ValueError("a model has at least one slot (its output layer)")
    if min(slot_bytes) <= 0:
        raise ValueError(f"every slot holds bytes, got {min(slot_bytes)}")
    ends = [0, *accumulate(slot_bytes)]
    slots = len(slot_bytes)

    def reach(start: int, card: int, cap: int) -> int:
        """How far the card's free bytes carry the slots from ``start`` (itself: none), at
        most to ``cap``."""
        room = free[card] - per_card_bytes
        return start if room < 0 else min(cap, bisect_right(ends, ends[start] + room) - 1)

    # cards of one size are alike: a state counts how many of each size are used (taken in
    # the order given), so identical cards do not multiply the states
    sizes = sorted(set(free))
    members = [[i for i, f in enumerate(free) if f == size] for size in sizes]
    State = tuple[int, tuple[int, ...], tuple[int, ...]]  # reach, cards in order, slot ends
    best: dict[tuple[int, ...], State] = {(0,) * len(sizes): (0, (), ())}
    for taken in range(len(free)):
        cap = slots - max(0, min_cards - 1 - taken)
        grown: dict[tuple[int, ...], State] = {}
        for used, (start, order, stops) in best.items():
            for kind, cards in enumerate(members):
                if used[kind] == len(cards):
                    continue
                card = cards[used[kind]]
                farther = reach(start, card, cap)
                if farther == start:
                    continue
                state = (*used[:kind], used[kind] + 1, *used[kind + 1 :])
                found = (farther, (*order, card), (*stops, farther))
                kept = grown.get(state)
                if kept is None or (farther, kept[1]) > (kept[0], found[1]):
                    grown[state] = found
        done = sorted(
            (order, stops) for farther, order, stops in grown.values() if farther == slots
        )
        if done:
            return _split(*done[0], ends, per_card_bytes)
        best = grown
    return None


def _split(order: tuple[int, ...], stops: tuple[int, ...], ends: list[int], per_card: int) -> Split:
    starts = (0, *stops[:-1])
    return Split(
        cards=order,
        counts=tuple(end - start for start, end in zip(starts, stops, strict=True)),
        shares=tuple(
            per_card + ends[end] - ends[start] for start, end in zip(starts, stops, strict=True)
        ),
    )
