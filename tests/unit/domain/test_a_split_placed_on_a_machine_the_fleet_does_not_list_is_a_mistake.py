"""A split's placement is made only on a machine the view's fleet lists: one placed on
any other machine is refused as a mistake, saying which machine."""

from __future__ import annotations

import pytest

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import MeasuredTable, RuntimeConfig, predictor
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger
from nodeau.domain.scheduling import FleetView, schedule, split_placement
from nodeau.domain.split_placement import SplitPlacement
from nodeau.domain.units import GIB
from tests.support.builders.split_fleets import ARCH, ask

CONFIG = RuntimeConfig(context_tokens=4096)
REQUEST = AdmissionRequest(workload="big", model="big", artifact_id="ab" * 32, config=CONFIG)
WEIGHTS = LayerWeights(input_bytes=GIB, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)


def test_a_split_on_a_machine_missing_from_the_fleet_is_refused_naming_it() -> None:
    gpus = tuple(Gpu(uuid=f"GPU-{i}", model="16 GiB", total_bytes=16 * GIB) for i in range(3))
    predict = predictor(
        arch=ARCH, artifact_id=REQUEST.artifact_id, artifact_bytes=18 * GIB, config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    view = FleetView(
        fleet=Fleet(machines=(Machine(name="m1", gpus=gpus),)), ledger=Ledger(),
        settings=SchedulingSettings(), excluded=(), verified_on=frozenset({"m1"}),
        predict=predict, plan=ENTERPRISE, split=ask(WEIGHTS),
    )  # fmt: skip
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
