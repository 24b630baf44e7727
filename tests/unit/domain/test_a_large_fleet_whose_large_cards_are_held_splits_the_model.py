"""A fleet of more cards than a decision weighs one by one, decided on its free cards'
index: when every card that holds the model alone is held, the model is split across free
cards of one machine, as on a small fleet, and the placement says why."""

from __future__ import annotations

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.free_cards import SHOWN
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import MeasuredTable, RuntimeConfig, predictor
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView, schedule
from nodeau.domain.units import GIB
from tests.support.builders.split_fleets import ARCH, ask

CONFIG = RuntimeConfig(context_tokens=4096)
REQUEST = AdmissionRequest(workload="big", model="big", artifact_id="ab" * 32, config=CONFIG)
WEIGHTS = LayerWeights(input_bytes=GIB, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)


def test_every_large_card_held_on_a_large_fleet_splits_across_free_cards() -> None:
    m1 = Machine(
        name="m1",
        gpus=(
            *(Gpu(uuid=f"GPU-{i}", model="16 GiB", total_bytes=16 * GIB) for i in range(3)),
            Gpu(uuid="GPU-9", model="48 GiB", total_bytes=48 * GIB),  # holds it, but held
        ),
    )
    singles = tuple(
        Machine(name=f"s{i}", gpus=(Gpu(uuid=f"GPU-s{i}", model="16 GiB", total_bytes=16 * GIB),))
        for i in range(SHOWN)
    )
    fleet = Fleet(machines=(m1, *singles))
    assert fleet.card_count > SHOWN
    predict = predictor(
        arch=ARCH, artifact_id=REQUEST.artifact_id, artifact_bytes=18 * GIB, config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    view = FleetView(
        fleet=fleet,
        ledger=Ledger(
            reservations=(Reservation(workload="other", machine="m1", gpu_uuid="GPU-9", bytes=GIB),)
        ),
        settings=SchedulingSettings(), excluded=(), verified_on=frozenset({"m1"}),
        predict=predict, plan=ENTERPRISE, split=ask(WEIGHTS),
    )  # fmt: skip
    scheduled = schedule(REQUEST, view).unwrap()
    placement = scheduled.placement
    assert scheduled.admitted.request == REQUEST
    assert placement.workload == "big" and placement.machine == "m1"
    assert [r.gpu_uuid for r in placement.reservations] == ["GPU-0", "GPU-1"]
    assert all(r.workload == "big" for r in placement.reservations)
    assert placement.why.startswith(
        "every card that holds big alone (21.38 GiB, estimated) is held, so it is split by "
        "layers across 2 of m1's 4 cards,"
    )
