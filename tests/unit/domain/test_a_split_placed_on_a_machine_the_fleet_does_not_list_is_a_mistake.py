"""A split's placement is made only on a machine the view's fleet lists: one placed on
any other machine is refused as a mistake, saying which machine."""

from __future__ import annotations

import pytest

from nodeau.domain.refusals import ReasonCode
from nodeau.domain.scheduling import schedule, split_placement
from nodeau.domain.split_placement import SplitPlacement
from tests.support.builders.split_fleets import REQUEST, one_machine


def test_a_split_on_a_machine_missing_from_the_fleet_is_refused_naming_it() -> None:
    view = one_machine()
    scheduled = schedule(REQUEST, view).unwrap()
    found = scheduled.placement
    assert found.machine == "m1" and found.shares
    elsewhere = SplitPlacement(
        machine="m9",
        gpu_uuids=tuple(r.gpu_uuid for r in found.reservations),
        counts=found.counts,
        shares=found.shares,
    )
    with pytest.raises(
        ValueError, match=r"^a split placed on m9, a machine the fleet does not list$"
    ):
        split_placement(scheduled.admitted, elsewhere, view, {}, ReasonCode.NO_CARD_LARGE_ENOUGH)
