"""The free cards' index chooses what weighing every card chooses, and stays small.

The oracle is ``admit`` and ``place`` over every card; over random fleets, ledgers and plans the
index gives the same choices, sentences and counts, and carried through reservations equals a
fresh one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.admission import Admitted, CardCounts, admit
from nodeau.domain.free_cards import SHOWN, FreeCards
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, Prediction, Source, Term
from nodeau.domain.placement import Placement, Policy, SchedulingSettings, place
from nodeau.domain.plans import ENTERPRISE, PlanName, PlanTerms, plan_scope
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, Reservation, reserve
from nodeau.domain.scheduling import FleetView, limit_refusal, schedule
from tests.support.builders.fleets import flat, fleet, gpu, machine, request

MODELS = ("NVIDIA L4", "NVIDIA H100")


def per_model(needs: dict[str, int]) -> Callable[[str], Prediction]:
    """A predictor with its own one-term peak for each GPU model."""
    made = {
        model: Prediction(
            terms=(Term(name="peak", bytes=n, source=Source.ESTIMATED, basis="test"),),
            source=Source.ESTIMATED,
        )
        for model, n in needs.items()
    }
    return made.__getitem__


def weighed(
    fleet_: Fleet,
    ledger: Ledger,
    settings_: SchedulingSettings,
    plan: PlanTerms,
    verified: frozenset[str],
    excluded: tuple[tuple[str, str], ...],
    predict: Callable[[str], Prediction],
) -> tuple[Admitted, Placement] | Refusal:
    """The decision weighing every card, or its refusal."""
    match admit(request(), fleet_, ledger, verified, predict):
        case Failure(Refusal() as refused):
            return refused
        case Success(Admitted() as admitted):
            pass
    out = {name for name, _why in excluded}
    scope = plan_scope(
        plan,
        ((m.name, tuple(g.uuid for g in m.gpus)) for m in fleet_.machines),
        holding={r.machine for r in ledger.reservations},
        taking_work={m.name for m in fleet_.machines if m.name not in out},
    )
    left_out = {**dict(scope.left_out), **dict(excluded)}
    limited = limit_refusal(admitted, left_out, scope, plan)
    if limited is not None:
        return limited
    placed = place(admitted, fleet_, ledger, settings_, left_out, covered=scope.covered_gpus)
    return placed.failure() if isinstance(placed, Failure) else (admitted, placed.unwrap())


@st.composite
def decisions(
    draw: st.DrawFn,
) -> tuple[
    Fleet,
    Ledger,
    SchedulingSettings,
    PlanTerms,
    frozenset[str],
    tuple[tuple[str, str], ...],
    dict[str, int],
]:
    machines = []
    for i in range(draw(st.integers(1, 7))):
        sizes = draw(st.lists(st.sampled_from([16, 24, 48, 80]), max_size=6))
        models = [draw(st.sampled_from(MODELS)) for _ in sizes]
        machines.append(
            machine(
                f"m{i}",
                *(
                    gpu(f"GPU-{i}-{j}", s, m)
                    for j, (s, m) in enumerate(zip(sizes, models, strict=True))
                ),
            )
        )
    f = fleet(*machines)
    ledger = Ledger()
    for k, (m, g) in enumerate(f.gpus):
        if draw(st.booleans()):
            ledger = reserve(
                ledger, Reservation(workload=f"h{k}", machine=m.name, gpu_uuid=g.uuid, bytes=GIB), g
            ).unwrap()
    names = [m.name for m in f.machines]
    verified = frozenset(draw(st.lists(st.sampled_from(names), max_size=len(names))))
    excluded = tuple(
        (m, "drained") for m in sorted(set(draw(st.lists(st.sampled_from(names), max_size=2))))
    )
    overrides = tuple(
        sorted(
            {
                m: draw(st.sampled_from(list(Policy)))
                for m in draw(st.lists(st.sampled_from(names), max_size=3))
            }.items()
        )
    )
    settings_ = SchedulingSettings(
        fleet_policy=draw(st.sampled_from(list(Policy))), overrides=overrides
    )
    plan = draw(
        st.sampled_from([ENTERPRISE, PlanTerms(name=PlanName.PRO, max_machines=3, max_gpus=7)])
    )
    needs = {model: draw(st.sampled_from([10, 20, 30, 60])) * GIB for model in MODELS}
    return f, ledger, settings_, plan, verified, excluded, needs


def same_decision(
    got: tuple[Admitted, Placement] | Refusal | None, want: tuple[Admitted, Placement] | Refusal
) -> None:
    """The index's decision is the weighing's; a refusal is the weighing's own, or left to
    it (None) when it is not the full fleet's."""
    if isinstance(want, Refusal):
        assert got is None or got == want
        return
    assert got is not None and not isinstance(got, Refusal)
    (admitted, placement), (every, chosen) = got, want
    assert placement.reservation == chosen.reservation
    assert (placement.machine, placement.gpu_uuid, placement.policy) == (
        chosen.machine,
        chosen.gpu_uuid,
        chosen.policy,
    )
    assert placement.why == chosen.why
    assert placement.excluded == chosen.excluded
    assert placement.ranked == chosen.ranked[:SHOWN]
    assert placement.candidates == len(chosen.ranked)
    assert admitted.predictions == every.predictions
    assert admitted.request == every.request
    assert placement.workload == chosen.workload
    assert admitted.counts == CardCounts.of(every.cards)
    by_uuid = {c.gpu_uuid: c for c in every.cards}
    assert admitted.cards == tuple(by_uuid[r.gpu_uuid] for r in placement.ranked)


@settings(max_examples=300)
@given(decisions())
def test_the_index_chooses_what_weighing_every_card_chooses(drawn) -> None:  # type: ignore[no-untyped-def]
    f, ledger, settings_, plan, verified, excluded, needs = drawn
    index = FreeCards.of(f, ledger, settings_, plan)
    got = index.decide(request(), verified_on=verified, excluded=excluded, predict=per_model(needs))
    same_decision(got, weighed(f, ledger, settings_, plan, verified, excluded, per_model(needs)))


@settings(max_examples=150)
@given(decisions(), st.integers(1, 12))
def test_an_index_carried_through_reservations_equals_one_made_afresh(drawn, rounds: int) -> None:  # type: ignore[no-untyped-def]
    f, ledger, settings_, plan, verified, excluded, needs = drawn
    predict = per_model(needs)
    carried = FreeCards.of(f, ledger, settings_, plan)
    for k in range(rounds):
        asked = request(f"w{k}")
        decided = carried.decide(asked, verified_on=verified, excluded=excluded, predict=predict)
        fresh = FreeCards.of(f, carried.ledger, settings_, plan)
        assert carried.order == fresh.order
        assert carried.held_on == fresh.held_on
        assert carried.groups == fresh.groups
        assert decided == fresh.decide(
            asked, verified_on=verified, excluded=excluded, predict=predict
        )
        if not isinstance(decided, tuple):
            return
        carried = carried.reserve(decided[1].reservation).unwrap()


def big_fleet(machines: int, cards: int) -> Fleet:
    return fleet(
        *(
            machine(f"m{i:02d}", *(gpu(f"GPU-{i:02d}-{j}", 80) for j in range(cards)))
            for i in range(machines)
        )
    )


def view_of(f: Fleet, ledger: Ledger, **kw: object) -> FleetView:
    values: dict[str, object] = dict(
        fleet=f,
        ledger=ledger,
        settings=SchedulingSettings(),
        excluded=(),
        verified_on=frozenset(m.name for m in f.machines),
        predict=flat(30 * GIB),
        plan=ENTERPRISE,
    )
    values.update(kw)
    return FleetView(**values)  # type: ignore[arg-type]


def test_a_large_fleets_decision_keeps_the_best_candidates_and_counts_every_card() -> None:
    f = big_fleet(10, 8)
    ledger = Ledger()
    for uuid in ("GPU-03-0", "GPU-03-1", "GPU-07-5"):
        located = f.locate(uuid)
        assert located is not None
        held = Reservation(workload=f"h-{uuid}", machine=located[0].name, gpu_uuid=uuid, bytes=GIB)
        ledger = reserve(ledger, held, located[1]).unwrap()
    both = schedule(request(), view_of(f, ledger)).unwrap()
    assert len(both.admitted.cards) == SHOWN
    assert both.admitted.counts == CardCounts(
        cards=80, too_small=0, held=3, no_verified_copy=0, accepted=77
    )
    # pack: m03 holds 2 of its 8 cards, the fullest machine; its free cards come first
    assert both.placement.gpu_uuid == "GPU-03-2"
    assert [c.gpu_uuid for c in both.admitted.cards[:6]] == [f"GPU-03-{j}" for j in range(2, 8)]
    assert both.admitted.cards[6].gpu_uuid == "GPU-07-0"
    assert both.placement.candidates == 77
    assert both.placement.why.endswith("76 other candidate(s) ranked below")


def test_a_large_fleets_refusal_names_a_few_holders_and_counts_the_rest() -> None:
    f = big_fleet(3, 8)
    ledger = Ledger()
    for k, (m, g) in enumerate(f.gpus):
        ledger = reserve(
            ledger, Reservation(workload=f"w{k}", machine=m.name, gpu_uuid=g.uuid, bytes=GIB), g
        ).unwrap()
    refusal = schedule(request(), view_of(f, ledger)).failure()
    assert refusal.code is ReasonCode.NO_FREE_CARD
    assert refusal.sentence == (
        "qwen needs 30.00 GiB (estimated); every card large enough is held: "
        + ", ".join(f"GPU-00-{j} on m00 by w{j}" for j in range(8))
        + ", and 16 more"
    )


def test_a_refusal_for_copies_names_a_few_machines_and_counts_the_rest() -> None:
    f = big_fleet(12, 2)
    refusal = schedule(request(), view_of(f, Ledger(), verified_on=frozenset())).failure()
    assert refusal.code is ReasonCode.NO_VERIFIED_COPY
    assert refusal.sentence.startswith(
        "qwen fits a free card on m00, m01, m02, m03, m04, m05, m06, m07 and 4 more, but no "
        "such machine holds a verified copy"
    )


def test_a_view_refuses_an_index_of_another_ledger() -> None:
    f = big_fleet(3, 8)
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), ENTERPRISE)
    with pytest.raises(ValueError, match="not of this view's fleet and ledger"):
        view_of(f, Ledger(), cards=index)
    assert view_of(f, index.ledger, cards=index).cards is index


def test_reserving_a_held_card_through_the_index_is_the_ledgers_refusal() -> None:
    f = big_fleet(3, 8)
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), ENTERPRISE)
    taken = index.reserve(
        Reservation(workload="a", machine="m00", gpu_uuid="GPU-00-0", bytes=GIB)
    ).unwrap()
    again = taken.reserve(Reservation(workload="b", machine="m00", gpu_uuid="GPU-00-0", bytes=GIB))
    assert again.failure().code is ReasonCode.CARD_HELD
    same = taken.reserve(Reservation(workload="a", machine="m00", gpu_uuid="GPU-00-0", bytes=GIB))
    assert same.unwrap() is taken
    with pytest.raises(ValueError, match="GPU-00-1 is on m00, not on m01"):
        index.reserve(Reservation(workload="d", machine="m01", gpu_uuid="GPU-00-1", bytes=GIB))
    with pytest.raises(ValueError, match="GPU-99-0 is not a card of this fleet"):
        index.reserve(Reservation(workload="c", machine="m99", gpu_uuid="GPU-99-0", bytes=GIB))


def test_a_full_fleets_refusal_is_said_by_the_index_as_weighing_every_card_says_it() -> None:
    f = big_fleet(3, 8)
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), ENTERPRISE)
    for k, (m, g) in enumerate(f.gpus):
        index.reserve(
            Reservation(workload=f"w{k}", machine=m.name, gpu_uuid=g.uuid, bytes=GIB)
        ).unwrap()
    said = index.decide(
        request(), verified_on=frozenset({"m00"}), excluded=(), predict=flat(30 * GIB)
    )
    assert isinstance(said, Refusal)
    assert said == weighed(
        f, index.ledger, SchedulingSettings(), ENTERPRISE, frozenset({"m00"}), (), flat(30 * GIB)
    )
    # nothing fits: not the index's to say (None), and weighing every card says too small
    assert (
        index.decide(request(), verified_on=frozenset(), excluded=(), predict=flat(90 * GIB))
        is None
    )


def answers_as_made_afresh(followed: FreeCards, drawn) -> None:  # type: ignore[no-untyped-def]
    """``followed`` holds and decides what an index made afresh over its ledger does."""
    f, _ledger, settings_, plan, verified, excluded, needs = drawn
    fresh = FreeCards.of(f, followed.ledger, settings_, plan)
    assert (followed.order, followed.held_on, followed.groups) == (
        fresh.order,
        fresh.held_on,
        fresh.groups,
    )
    predict = per_model(needs)
    assert followed.decide(request(), verified_on=verified, excluded=excluded, predict=predict) == (
        fresh.decide(request(), verified_on=verified, excluded=excluded, predict=predict)
    )


@settings(max_examples=150)
@given(decisions(), st.data())
def test_an_index_following_another_ledger_equals_one_made_over_it(
    drawn, data: st.DataObject
) -> None:  # type: ignore[no-untyped-def]
    f, ledger, settings_, plan, *_ = drawn
    index = FreeCards.of(f, ledger, settings_, plan)
    kept = [r for r in ledger.reservations if data.draw(st.booleans())]
    later = Ledger(reservations=tuple(kept))
    for k, (m, g) in enumerate(f.gpus):
        if later.holder(g.uuid) is None and data.draw(st.booleans()):
            later = reserve(
                later, Reservation(workload=f"n{k}", machine=m.name, gpu_uuid=g.uuid, bytes=GIB), g
            ).unwrap()
    order = data.draw(st.permutations(later.reservations))
    later = Ledger(reservations=tuple(order))  # a store lists them in its own order
    followed = index.follow(later)
    assert followed.ledger is later
    answers_as_made_afresh(followed, drawn)


@settings(max_examples=100)
@given(decisions(), st.data())
def test_an_index_following_its_ledger_with_one_more_reservation_equals_one_made_over_it(
    drawn, data: st.DataObject
) -> None:  # type: ignore[no-untyped-def]
    f, ledger, settings_, plan, *_ = drawn
    index = FreeCards.of(f, ledger, settings_, plan)
    free = [(m, g) for m, g in f.gpus if ledger.holder(g.uuid) is None]
    for k in range(data.draw(st.integers(min_value=0, max_value=len(free)))):
        m, g = free[k]
        later = ledger.added(
            Reservation(workload=f"n{k}", machine=m.name, gpu_uuid=g.uuid, bytes=GIB)
        )
        assert later.added_to(ledger) == later.reservations[-1]
        assert later.added_to(later) is None
        followed = index.follow(later)
        assert followed is index  # followed by the one difference, nothing made again
        assert followed.ledger is later
        answers_as_made_afresh(followed, drawn)
        ledger = later


def test_a_card_exactly_the_size_needed_is_chosen_and_counted_large_enough() -> None:
    f = fleet(machine("m00", gpu("GPU-00-0", 24), gpu("GPU-00-1", 16)))
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), ENTERPRISE)
    got = index.decide(
        request(), verified_on=frozenset({"m00"}), excluded=(), predict=flat(24 * GIB)
    )
    assert isinstance(got, tuple)
    admitted, placement = got
    assert placement.gpu_uuid == "GPU-00-0"
    assert admitted.counts == CardCounts(
        cards=2, too_small=1, held=0, no_verified_copy=0, accepted=1
    )
    same_decision(
        got,
        weighed(
            f, Ledger(), SchedulingSettings(), ENTERPRISE, frozenset({"m00"}), (), flat(24 * GIB)
        ),
    )


def test_a_held_card_exactly_the_size_needed_is_named_as_its_holders() -> None:
    f = fleet(machine("m00", gpu("GPU-00-0", 24), gpu("GPU-00-1", 16)))
    held = Reservation(workload="w", machine="m00", gpu_uuid="GPU-00-0", bytes=GIB)
    ledger = reserve(Ledger(), held, f.gpus[0][1]).unwrap()
    index = FreeCards.of(f, ledger, SchedulingSettings(), ENTERPRISE)
    said = index.decide(
        request(), verified_on=frozenset({"m00"}), excluded=(), predict=flat(24 * GIB)
    )
    assert isinstance(said, Refusal)
    assert said.code is ReasonCode.NO_FREE_CARD
    assert said.sentence == (
        "qwen needs 24.00 GiB (estimated); every card large enough is held: GPU-00-0 on m00 by w"
    )


def test_a_full_fleets_refusal_counts_the_held_cards_of_every_size_large_enough() -> None:
    f = fleet(
        machine("m00", *(gpu(f"GPU-00-{j}", 80) for j in range(8))),
        machine("m01", gpu("GPU-01-0", 48), gpu("GPU-01-1", 48)),
    )
    ledger = Ledger()
    for k, (m, g) in enumerate(f.gpus):
        ledger = reserve(
            ledger, Reservation(workload=f"w{k}", machine=m.name, gpu_uuid=g.uuid, bytes=GIB), g
        ).unwrap()
    index = FreeCards.of(f, ledger, SchedulingSettings(), ENTERPRISE)
    said = index.decide(
        request(), verified_on=frozenset({"m00"}), excluded=(), predict=flat(30 * GIB)
    )
    assert isinstance(said, Refusal)
    assert said.sentence.endswith("GPU-00-7 on m00 by w7, and 2 more")


@pytest.mark.parametrize(
    "plan",
    [
        PlanTerms(name=PlanName.PRO, max_machines=1),
        PlanTerms(name=PlanName.PRO, max_gpus=1),
    ],
    ids=["machines bounded", "cards bounded"],
)
def test_a_plan_with_one_bound_counts_a_drained_machine_after_those_taking_work(
    plan: PlanTerms,
) -> None:
    f = fleet(machine("m00", gpu("GPU-00-0", 80)), machine("m01", gpu("GPU-01-0", 80)))
    verified = frozenset({"m00", "m01"})
    excluded = (("m00", "drained"),)
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), plan)
    got = index.decide(request(), verified_on=verified, excluded=excluded, predict=flat(30 * GIB))
    assert isinstance(got, tuple)
    assert got[1].gpu_uuid == "GPU-01-0"
    same_decision(
        got, weighed(f, Ledger(), SchedulingSettings(), plan, verified, excluded, flat(30 * GIB))
    )


def two_machines() -> Fleet:
    return fleet(
        machine("m00", gpu("GPU-00-0", 80), gpu("GPU-00-1", 80)),
        machine("m01", gpu("GPU-01-0", 80), gpu("GPU-01-1", 80)),
    )


def made_afresh(followed: FreeCards, f: Fleet) -> None:
    fresh = FreeCards.of(f, followed.ledger, SchedulingSettings(), ENTERPRISE)
    assert (followed.order, followed.held_on, followed.groups) == (
        fresh.order,
        fresh.held_on,
        fresh.groups,
    )


def test_an_index_following_several_new_reservations_records_them_without_being_made_again() -> (
    None
):
    f = two_machines()
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), ENTERPRISE)
    later = Ledger(
        reservations=(
            Reservation(workload="a", machine="m00", gpu_uuid="GPU-00-0", bytes=GIB),
            Reservation(workload="b", machine="m01", gpu_uuid="GPU-01-1", bytes=GIB),
        )
    )
    followed = index.follow(later)
    assert followed is index
    assert followed.ledger is later
    made_afresh(followed, f)


@pytest.mark.parametrize("others", [0, 1], ids=["alone", "with another"])
@pytest.mark.parametrize(
    "odd",
    [
        Reservation(workload="gone", machine="m09", gpu_uuid="GPU-09-0", bytes=GIB),
        Reservation(workload="moved", machine="m01", gpu_uuid="GPU-00-1", bytes=GIB),
    ],
    ids=["a card not in the fleet", "a card named on another machine"],
)
def test_an_index_following_a_reservation_it_cannot_record_is_made_afresh(
    odd: Reservation, others: int
) -> None:
    f = two_machines()
    index = FreeCards.of(f, Ledger(), SchedulingSettings(), ENTERPRISE)
    first = (Reservation(workload="a", machine="m00", gpu_uuid="GPU-00-0", bytes=GIB),)
    later = index.ledger
    for r in (*first[:others], odd):
        later = later.added(r)
    assert (later.added_to(index.ledger) == odd) is (others == 0)
    followed = index.follow(later)
    assert isinstance(followed, FreeCards)
    assert followed is not index
    assert followed.ledger is later
    made_afresh(followed, f)
