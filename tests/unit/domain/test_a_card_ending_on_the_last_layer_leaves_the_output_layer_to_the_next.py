"""A card whose slots end on the last repeating layer does not hold the output layer: its
weights say so, and the next card's say it holds the output layer alone."""

from __future__ import annotations

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import card_shares
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.units import MIB
from tests.support.builders.split_fleets import ARCH


def test_the_card_ending_on_the_last_layer_says_only_its_layers() -> None:
    weights = LayerWeights(input_bytes=MIB, layer_bytes=(64 * MIB,) * 8, output_bytes=32 * MIB)
    first, last = card_shares(
        ARCH, weights, RuntimeConfig(context_tokens=4096), Allowances(), [8, 1]
    )
    assert first.terms[0].name == last.terms[0].name == "weights"
    assert first.terms[0].basis == "layers 0-7"
    assert first.terms[0].bytes == 8 * 64 * MIB
    assert last.terms[0].basis == "no layer and the output layer"
    assert last.terms[0].bytes == 32 * MIB
