"""Scheduling with a split allowed: one card whenever one free card holds the model; else the
fewest free cards of one machine, every share within its card; the ledger after the
admission holds no card twice and over-commits none; a refusal says no split holds it, or
that a limit alone stands in its way.

Checked against the pure arithmetic the decision is made of (``predict_peak`` for one
card, ``split_for`` for several) on generated fleets and ledgers.
"""

from __future__ import annotations

from attrs import evolve
from hypothesis import event, given, settings
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import split_for
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import MeasuredTable, RuntimeConfig, predictor
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE, PlanName, PlanTerms
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, over_committed, reserve_cards
from nodeau.domain.scheduling import DRAINED, OUTSIDE_LIMITS, FleetView, schedule
from nodeau.domain.split_placement import SplitAsk, free_cards
from nodeau.domain.units import GIB
from tests.support.builders.split_fleets import ARCH, ask, fleets

CONFIG = RuntimeConfig(context_tokens=4096)
REQUEST = AdmissionRequest(workload="big", model="big", artifact_id="ab" * 32, config=CONFIG)


@st.composite
def views(draw: st.DrawFn) -> FleetView:
    fleet, ledger, _verified = draw(fleets(sizes=(16, 24, 48, 80), min_cards=1))
    layer = draw(st.integers(3, 14)) * GIB
    weights = LayerWeights(input_bytes=GIB, layer_bytes=(layer,) * ARCH.n_layers,
                           output_bytes=draw(st.integers(1, 8)) * GIB)  # fmt: skip
    predict = predictor(
        arch=ARCH, artifact_id=REQUEST.artifact_id,
        artifact_bytes=weights.input_bytes + sum(weights.slot_bytes), config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    return FleetView(
        fleet=fleet,
        ledger=ledger,
        settings=SchedulingSettings(),
        excluded=(),
        verified_on=frozenset(m.name for m in fleet.machines),
        predict=predict,
        plan=ENTERPRISE,
        split=SplitAsk(arch=ARCH, weights=weights, config=CONFIG, allowances=Allowances()),
    )


@settings(max_examples=300, deadline=None)
@given(views())
def test_one_card_when_one_holds_it_else_the_fewest_of_one_machine(view: FleetView) -> None:
    assert view.split is not None
    one_fits = any(
        view.ledger.holder(g.uuid) is None and view.predict(g.model).total_bytes <= g.total_bytes
        for _machine, g in view.fleet.gpus
    )
    fewest = []
    for m in view.fleet.machines:
        free = [g.total_bytes for g in free_cards(m.gpus, view.ledger)]
        found = split_for(ARCH, view.split.weights, CONFIG, Allowances(), free, min_cards=2)
        if found is not None:
            fewest.append(len(found.cards))
    match schedule(REQUEST, view):
        case Failure(refusal):
            event(f"refused: {refusal.code.value}")
            assert not one_fits and not fewest
            assert refusal.code in (ReasonCode.NO_CARD_LARGE_ENOUGH, ReasonCode.NO_FREE_CARD)
            if refusal.code is ReasonCode.NO_CARD_LARGE_ENOUGH:
                assert refusal.sentence.endswith("nor do the free cards of any one machine "
                                                 "hold it split by layers")  # fmt: skip
        case Success(scheduled):
            placement = scheduled.placement
            event(f"{len(placement.reservations)} card(s)")
            if one_fits:
                assert placement.more == () and placement.counts == ()
                return
            assert len(placement.reservations) == min(fewest) >= 2
            machine = view.fleet.machine(placement.machine)
            assert machine is not None
            gpus = [machine.gpu(r.gpu_uuid) for r in placement.reservations]
            assert all(g is not None for g in gpus)
            for reservation, share, gpu in zip(
                placement.reservations, placement.shares, gpus, strict=True
            ):
                assert gpu is not None and view.ledger.holder(gpu.uuid) is None
                assert reservation.bytes == share.total_bytes <= gpu.total_bytes
            assert sum(placement.counts) == ARCH.n_layers + 1
            after = reserve_cards(view.ledger, placement.reservations, [g for g in gpus if g])
            assert isinstance(after, Success)
            assert over_committed(after.unwrap(), view.fleet) == ()


def one_machine(**changes: object) -> FleetView:
    """m1's three 16 GiB cards, free; a model of 18 GiB no one of them holds, two do."""
    gpus = tuple(Gpu(uuid=f"GPU-{i}", model="16 GiB", total_bytes=16 * GIB) for i in range(3))
    weights = LayerWeights(input_bytes=GIB, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)
    predict = predictor(
        arch=ARCH, artifact_id=REQUEST.artifact_id, artifact_bytes=18 * GIB, config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    view = FleetView(
        fleet=Fleet(machines=(Machine(name="m1", gpus=gpus),)), ledger=Ledger(),
        settings=SchedulingSettings(), excluded=(), verified_on=frozenset({"m1"}),
        predict=predict, plan=ENTERPRISE, split=ask(weights),
    )  # fmt: skip
    return evolve(view, **changes)


def test_a_split_only_a_limit_stands_in_the_way_of_is_refused_as_a_limit() -> None:
    assert len(schedule(REQUEST, one_machine()).unwrap().placement.reservations) == 2
    outside = schedule(REQUEST, one_machine(excluded=(("m1", OUTSIDE_LIMITS),))).failure()
    assert outside.code is ReasonCode.MACHINE_NOT_ALLOWED
    assert "outside the organisation's limits (m1)" in outside.sentence
    small_plan = PlanTerms(name=PlanName.HOME, max_gpus=1)
    over = schedule(REQUEST, one_machine(plan=small_plan)).failure()
    assert over.code is ReasonCode.GPUS_OVER_PLAN
    assert "beyond what the" in over.sentence and "(1 GPUs; on m1)" in over.sentence
    drained = schedule(REQUEST, one_machine(excluded=(("m1", DRAINED),))).failure()
    assert drained.code is ReasonCode.NO_CARD_LARGE_ENOUGH  # not a limit: a person's mark
