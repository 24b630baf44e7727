"""An artifact's state needs a file (said whole; cards, machines and predictions:
test_values_refused.py); a fleet answers the same machine however often it is asked."""

from __future__ import annotations

import pytest

from nodeau.domain.cache import artifact_state
from tests.support.builders.fleets import fleet, gpu, machine


def refusal(make: object) -> str:
    assert callable(make)
    with pytest.raises(ValueError) as raised:
        make()
    return str(raised.value)


def test_an_artifact_without_files_is_refused() -> None:
    assert refusal(lambda: artifact_state([])) == "an artifact has at least one file"


def test_a_fleet_finds_each_machine_by_name_every_time() -> None:
    cards = fleet(machine("m1", gpu("A")), machine("m2", gpu("B")))
    for _ in range(2):
        found = cards.machine("m2")
        assert found is not None and found.gpus[0].uuid == "B"
        assert cards.machine("m3") is None
