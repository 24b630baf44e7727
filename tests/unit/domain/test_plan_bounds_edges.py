"""The plan's bounds at their edges: every machine past the machine bound is left out, and
every one after the GPU bound is spent, each named; a machine with no card does not reset
the count of cards left out; a refusal for cards past the GPU bound is a GPU limit, and a
partly covered machine's uncovered card is never chosen even when it ranks first."""

from __future__ import annotations

from returns.pipeline import is_successful

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import PlanName, PlanTerms, plan_scope
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView, schedule
from tests.unit.domain.fleets import flat, fleet, gpu, machine

ONE_MACHINE = PlanTerms(name=PlanName.HOME, max_machines=1)
TWO_GPUS = PlanTerms(name=PlanName.PRO, max_gpus=2)
THREE_GPUS = PlanTerms(name=PlanName.PRO, max_gpus=3)


def test_every_machine_past_the_machine_bound_is_left_out_by_name() -> None:
    scope = plan_scope(ONE_MACHINE, [("m1", ("A",)), ("m2", ("B",)), ("m3", ("C",))])
    assert scope.left_out == (
        ("m2", "beyond the Home plan's 1 machines"),
        ("m3", "beyond the Home plan's 1 machines"),
    )
    assert scope.covered_gpus == frozenset({"A"})


def test_every_machine_after_the_gpu_bound_is_spent_is_left_out_by_name() -> None:
    scope = plan_scope(TWO_GPUS, [("m1", ("A", "B")), ("m2", ("C",)), ("m3", ("D",))])
    assert scope.left_out == (
        ("m2", "beyond the Pro plan's 2 GPUs"),
        ("m3", "beyond the Pro plan's 2 GPUs"),
    )
    assert scope.covered_gpus == frozenset({"A", "B"})


def test_a_machine_with_no_card_does_not_reset_the_cards_left_out() -> None:
    scope = plan_scope(THREE_GPUS, [("m1", ("A", "B")), ("m2", ("C", "D")), ("m3", ())])
    assert scope.covered_gpus == frozenset({"A", "B", "C"})
    assert scope.gpus_left_out == 1  # D


NO_LEDGER = Ledger()


def view(cards: Fleet, plan: PlanTerms, ledger: Ledger = NO_LEDGER) -> FleetView:
    return FleetView(
        fleet=cards,
        ledger=ledger,
        settings=SchedulingSettings(),
        excluded=(),
        verified_on=frozenset(m.name for m in cards.machines),
        predict=flat(8 * GIB),
        plan=plan,
    )


REQUEST = AdmissionRequest(
    workload="chat", model="qwen", artifact_id="ab" * 32, config=RuntimeConfig(context_tokens=4096)
)


def test_a_free_card_past_the_gpu_bound_is_refused_as_a_gpu_limit() -> None:
    cards = fleet(machine("m1", gpu("A"), gpu("B"), gpu("C")))
    held = Ledger(
        reservations=tuple(
            Reservation(workload=w, machine="m1", gpu_uuid=u, bytes=GIB)
            for w, u in (("a", "A"), ("b", "B"))
        )
    )
    refusal = schedule(REQUEST, view(cards, TWO_GPUS, held)).failure()
    assert refusal.code is ReasonCode.GPUS_OVER_PLAN
    assert refusal.sentence == (
        "every card that can take qwen is beyond what the Pro plan covers (2 GPUs; on m1); "
        "an entitlement for a larger plan covers them (nodeau plan)"
    )


def test_a_machine_left_out_for_gpus_is_refused_as_a_gpu_limit() -> None:
    cards = fleet(machine("m1", gpu("A"), gpu("B")), machine("m2", gpu("C")))
    held = Ledger(
        reservations=tuple(
            Reservation(workload=w, machine="m1", gpu_uuid=u, bytes=GIB)
            for w, u in (("a", "A"), ("b", "B"))
        )
    )
    refusal = schedule(REQUEST, view(cards, TWO_GPUS, held)).failure()
    assert refusal.code is ReasonCode.GPUS_OVER_PLAN
    assert "(2 GPUs; on m2)" in refusal.sentence


def test_an_uncovered_card_that_would_rank_first_is_never_chosen() -> None:
    # m1's first card is covered (one GPU on this plan); its second, smaller, would rank first
    cards = fleet(machine("m1", gpu("A", 24), gpu("B", 16)))
    one_gpu = PlanTerms(name=PlanName.PRO, max_gpus=1)
    placed = schedule(REQUEST, view(cards, one_gpu))
    assert is_successful(placed)
    assert placed.unwrap().placement.gpu_uuid == "A"
    everything = schedule(REQUEST, view(cards, PlanTerms(name=PlanName.PRO)))
    assert everything.unwrap().placement.gpu_uuid == "B"
