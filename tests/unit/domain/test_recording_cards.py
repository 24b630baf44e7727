"""Whether a workload's record already holds another card than the one an admission reserves
(the rule a store's second writer meets before it records an admission)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attrs import evolve

from nodeau.domain.recording import Backing, holds_other_card
from nodeau.domain.records import Admission
from nodeau.domain.reservations import Reservation
from tests.support.builders.admissions import decider, fleet_of
from tests.support.clock import ticking
from tests.support.fakes.fake_state import FakeStateStore

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def admitted() -> Admission:
    store = FakeStateStore(clock=ticking(NOW))
    return store.admit("chat", decider("chat", fleet_of(1), NOW)).unwrap()


def test_the_reservation_the_admission_makes_is_not_another_card() -> None:
    admission = admitted()
    recorded = Backing(workload="chat", holds=admission.placement.reservation)
    assert holds_other_card(recorded, admission) is False


def test_nothing_held_is_not_another_card() -> None:
    assert holds_other_card(Backing(workload="chat", holds=None), admitted()) is False


@pytest.mark.parametrize(
    "change",
    [{"gpu_uuid": "GPU-other"}, {"machine": "elsewhere"}, {"bytes": 1}],
)
def test_a_held_reservation_that_differs_in_anything_is_another_card(
    change: dict[str, object],
) -> None:
    admission = admitted()
    other: Reservation = evolve(admission.placement.reservation, **change)
    assert holds_other_card(Backing(workload="chat", holds=other), admission) is True
