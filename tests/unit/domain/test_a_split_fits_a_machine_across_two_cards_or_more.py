"""Where a recovery may ever run a model (``machines_that_fit``): one card is judged by the
model's prediction, a split only across two cards or more of one machine. A machine whose
one large card the split's arithmetic would fill alone, beside a card too small for any
share, does not fit a model the prediction puts on no card."""

from __future__ import annotations

from nodeau.domain.card_split import LayerWeights
from nodeau.domain.recovery import machines_that_fit
from nodeau.domain.units import GIB
from tests.support.builders.fleets import flat, fleet, gpu, machine
from tests.support.builders.recovery_inputs import view
from tests.support.builders.split_fleets import ask

WEIGHTS = LayerWeights(input_bytes=GIB // 2, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)


def test_one_card_the_split_would_fill_alone_is_not_a_split() -> None:
    cards = fleet(
        machine("lopsided", gpu("L1", 24), gpu("L2", 2)),  # no share of a split fits L2
        machine("pair", gpu("P1", 24), gpu("P2", 24)),
    )
    whole_on_none = view(fleet=cards, predict=flat(30 * GIB), split=ask(WEIGHTS))
    assert machines_that_fit(whole_on_none) == frozenset({"pair"})
