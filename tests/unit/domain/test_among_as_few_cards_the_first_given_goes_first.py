"""Among as few cards, the split takes them in the order given (a caller's placement
order): the first card given takes the first slots, even where the other order fits too."""

from __future__ import annotations

from nodeau.domain.card_split import Split, fewest_cards


def test_the_first_card_given_takes_the_first_slots_whatever_its_size() -> None:
    # 5 layers of 10 and an output layer of 15 (65), 5 per card: 45 then 40 fits, as does
    # 40 then 45; the larger card is given first, so it goes first
    split = fewest_cards([10, 10, 10, 10, 10, 15], 5, [45, 40])
    assert split == Split(cards=(0, 1), counts=(4, 2), shares=(45, 30))
    assert fewest_cards([10, 10, 10, 10, 10, 15], 5, [40, 45]) == Split(
        cards=(0, 1), counts=(3, 3), shares=(35, 40)
    )
