"""Scheduling with a split allowed: one card whenever one free card holds the model.

Else the fewest free cards of one machine, each share within its card, the ledger never
over-committed; a refusal says no split holds it or which limit stands in the way. Checked against
``predict_peak`` and ``split_for`` on generated fleets and ledgers.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from attrs import evolve
from hypothesis import event, given, settings
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import split_for
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.free_cards import SHOWN
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import MeasuredTable, predictor
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.plans import ENTERPRISE, PlanName, PlanTerms
from nodeau.domain.recording import admitted_text, check_update, moved_text, released_text
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation, over_committed, reserve_cards
from nodeau.domain.scheduling import DRAINED, OUTSIDE_LIMITS, FleetView, schedule
from nodeau.domain.split_placement import SplitAsk, free_cards
from nodeau.domain.units import GIB
from nodeau.domain.workloads import Recovery, WorkloadState
from nodeau.ports.state import Snapshot
from tests.support.builders.split_fleets import ARCH, CONFIG, REQUEST, fleets, one_machine
from tests.support.contracts.split_state_contract import NOW, decide_big


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


def test_why_a_split_says_why_not_one_card_and_how_many_of_how_many() -> None:
    placement = schedule(REQUEST, one_machine()).unwrap().placement
    shares = ", ".join(f"{r.bytes / GIB:.2f} GiB" for r in placement.reservations)
    assert placement.why == (
        "no one card holds big (it needs 21.38 GiB, estimated; the largest card has 16.00 "
        "GiB), so it is split by layers across 2 of m1's 3 cards, the fewest free cards of "
        f"one machine whose every share fits (slots 6,3; shares {shares})"
    )
    assert [r.gpu_uuid for r in placement.reservations] == ["GPU-0", "GPU-1"]
    big_card = Gpu(uuid="GPU-9", model="48 GiB", total_bytes=48 * GIB)  # holds it, but held
    view = one_machine()
    machines = (evolve(view.fleet.machines[0], gpus=(*view.fleet.machines[0].gpus, big_card)),)
    held = Ledger(reservations=(
        Reservation(workload="other", machine="m1", gpu_uuid="GPU-9", bytes=GIB),
    ))  # fmt: skip
    placement = schedule(
        REQUEST, evolve(view, fleet=Fleet(machines=machines), ledger=held)
    ).unwrap().placement  # fmt: skip
    assert placement.why.startswith(
        "every card that holds big alone (21.38 GiB, estimated) is held, so it is split by "
        "layers across 2 of m1's 4 cards,"
    )
    spread = SchedulingSettings(overrides=(("m1", Policy.SPREAD),))
    placed = schedule(REQUEST, one_machine(settings=spread)).unwrap().placement
    assert placed.policy is Policy.SPREAD


def test_a_refusal_no_split_is_tried_for_is_the_one_card_refusal_itself() -> None:
    view = one_machine(split=None)
    refused = schedule(REQUEST, view).failure()
    assert refused.code is ReasonCode.NO_CARD_LARGE_ENOUGH
    assert "split" not in refused.sentence


def test_a_machine_bound_of_the_plan_is_named_when_only_it_stands_in_the_way() -> None:
    view = one_machine()
    other = Machine(name="a0", gpus=(Gpu(uuid="GPU-a", model="16 GiB", total_bytes=16 * GIB),))
    fleet = Fleet(machines=(other, *view.fleet.machines))  # a0 comes first by name
    bounded = PlanTerms(name=PlanName.PRO, max_machines=1)
    over = schedule(REQUEST, evolve(view, fleet=fleet, plan=bounded)).failure()
    assert over.code is ReasonCode.MACHINES_OVER_PLAN
    assert over.sentence == (
        "the cards that can take big split are beyond what the Pro plan covers (1 machines; "
        "on m1); an entitlement for a larger plan covers them (nodeau plan)"
    )


def test_a_fleet_decided_on_its_free_cards_index_splits_too() -> None:
    view = one_machine()
    many = tuple(
        Machine(name=f"m{i}", gpus=(Gpu(uuid=f"GPU-{i}-0", model="16 GiB", total_bytes=16 * GIB),))
        for i in range(2, 2 + SHOWN)
    )  # more cards than a decision weighs one by one, none of them free with a neighbour
    fleet = Fleet(machines=(*view.fleet.machines, *many))
    placement = schedule(REQUEST, evolve(view, fleet=fleet)).unwrap().placement
    assert placement.machine == "m1" and len(placement.reservations) == 2


def test_a_split_asked_for_two_cards_never_answers_one() -> None:
    weights = LayerWeights(input_bytes=GIB, layer_bytes=(GIB,) * 8, output_bytes=GIB)
    alone = split_for(ARCH, weights, CONFIG, Allowances(), [48 * GIB, 48 * GIB])
    assert alone is not None and len(alone.cards) == 1  # one card's arithmetic holds it
    two = split_for(ARCH, weights, CONFIG, Allowances(), [48 * GIB, 48 * GIB], min_cards=2)
    assert two is not None and len(two.cards) == 2 and min(two.counts) >= 1


def test_a_fleet_without_cards_is_refused_as_before() -> None:
    empty = one_machine(fleet=Fleet(machines=(Machine(name="m1"),)))
    refused = schedule(REQUEST, empty).failure()
    assert refused.sentence == "big cannot run: no machine in the fleet reports a GPU"


def test_spread_and_pack_choose_between_machines_needing_as_many_cards() -> None:
    view = one_machine()
    (m1,) = view.fleet.machines
    busy = evolve(m1, name="m0", gpus=tuple(evolve(g, uuid=f"B-{g.uuid}") for g in (
        *m1.gpus, Gpu(uuid="GPU-3", model="16 GiB", total_bytes=16 * GIB))))  # fmt: skip
    held = Ledger(reservations=(
        Reservation(workload="other", machine="m0", gpu_uuid="B-GPU-3", bytes=GIB),
    ))  # fmt: skip
    fleet = Fleet(machines=(busy, m1))
    both = frozenset({"m0", "m1"})
    packed = schedule(REQUEST, evolve(view, fleet=fleet, ledger=held, verified_on=both))
    spread = SchedulingSettings(fleet_policy=Policy.SPREAD)
    spreading = schedule(
        REQUEST, evolve(view, fleet=fleet, ledger=held, verified_on=both, settings=spread)
    )  # fmt: skip
    assert packed.unwrap().placement.machine == "m0"  # the fuller machine
    assert spreading.unwrap().placement.machine == "m1"  # the emptier one


def test_what_the_records_of_a_split_say_names_every_card() -> None:
    admission = decide_big("big")(Snapshot(ledger=Ledger(), workloads=())).unwrap()
    first, second = admission.placement.reservations
    gib = [f"{r.bytes / GIB:.2f} GiB" for r in (first, second)]
    assert admitted_text(admission) == (
        f"admitted across 2 cards on m1, reserving {gib[0]} of GPU-0, {gib[1]} of GPU-1"
    )
    stopped = evolve(
        admission.record, workload=evolve(admission.record.workload, state=WorkloadState.STOPPED)
    )
    freed = f"{(first.bytes + second.bytes) / GIB:.2f} GiB"
    assert released_text(stopped, first, second) == (
        f"stopped; GPU-0, GPU-1 on m1 are free again ({freed} released)"
    )
    moved = evolve(admission.record.workload, recoveries=1, last_recovery=Recovery(
        from_machine="m0", to_machine="m1", at=NOW, unreachable_since=NOW - timedelta(minutes=4),
        after=timedelta(minutes=3)))  # fmt: skip
    recovered = evolve(admission, record=evolve(admission.record, workload=moved))
    assert moved_text(recovered) == (
        f"recovered from m0 onto GPU-0, GPU-1 on m1, reserving {freed}; m0's card is freed"
    )
    with pytest.raises(ValueError, match=r"^a change to big on GPU-0, GPU-1 \(m1\) may not make "
                       r"it big on GPU-0, GPU-2 \(m1\)$"):  # fmt: skip
        check_update(admission.record, evolve(admission.record, workload=evolve(
            admission.record.workload, more_cards=("GPU-2",))))  # fmt: skip
