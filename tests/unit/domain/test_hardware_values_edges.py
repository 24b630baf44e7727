"""Hardware, cache and prediction values no plane could have recorded are refused with a
sentence written out here whole; a fleet answers the same machine however often it is asked."""

from __future__ import annotations

import pytest

from nodeau.domain.cache import artifact_state
from nodeau.domain.hardware import Gpu, Machine
from nodeau.domain.memory import GIB, Source, check_single_source
from tests.unit.domain.fleets import fleet, gpu, machine


def refusal(make: object) -> str:
    assert callable(make)
    with pytest.raises(ValueError) as raised:
        make()
    return str(raised.value)


def test_a_gpu_without_a_uuid_and_a_machine_without_a_name_are_refused() -> None:
    assert refusal(lambda: Gpu(uuid="  ", model="NVIDIA L4", total_bytes=GIB)) == (
        "a GPU needs a UUID"
    )
    assert refusal(lambda: Machine(name=" ", gpus=())) == "a machine needs a name"


def test_an_artifact_without_files_and_a_prediction_without_terms_are_refused() -> None:
    assert refusal(lambda: artifact_state([])) == "an artifact has at least one file"
    assert refusal(lambda: check_single_source([], Source.ESTIMATED)) == (
        "a prediction needs at least one term"
    )


def test_a_fleet_finds_each_machine_by_name_every_time() -> None:
    cards = fleet(machine("m1", gpu("A")), machine("m2", gpu("B")))
    for _ in range(2):
        found = cards.machine("m2")
        assert found is not None and found.gpus[0].uuid == "B"
        assert cards.machine("m3") is None
