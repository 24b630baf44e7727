"""The plan's bounds in a decision (what the plan covers: test_plan_scope_edges.py): a
refusal for cards past the GPU bound is a GPU limit, and a partly covered machine's
uncovered card is never chosen even when it ranks first."""

from __future__ import annotations

from returns.pipeline import is_successful

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import PlanName, PlanTerms
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView, schedule
from tests.unit.domain.fleets import flat, fleet, gpu, machine

TWO_GPUS = PlanTerms(name=PlanName.PRO, max_gpus=2)


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


# m1's cards A and B, the two the plan covers, held by other workloads
A_AND_B_HELD = Ledger(
    reservations=tuple(
        Reservation(workload=w, machine="m1", gpu_uuid=u, bytes=GIB)
        for w, u in (("a", "A"), ("b", "B"))
    )
)


def test_a_free_card_past_the_gpu_bound_is_refused_as_a_gpu_limit() -> None:
    cards = fleet(machine("m1", gpu("A"), gpu("B"), gpu("C")))
    refusal = schedule(REQUEST, view(cards, TWO_GPUS, A_AND_B_HELD)).failure()
    assert refusal.code is ReasonCode.GPUS_OVER_PLAN
    assert refusal.sentence == (
        "every card that can take qwen is beyond what the Pro plan covers (2 GPUs; on m1); "
        "an entitlement for a larger plan covers them (nodeau plan)"
    )


def test_a_machine_left_out_for_gpus_is_refused_as_a_gpu_limit() -> None:
    cards = fleet(machine("m1", gpu("A"), gpu("B")), machine("m2", gpu("C")))
    refusal = schedule(REQUEST, view(cards, TWO_GPUS, A_AND_B_HELD)).failure()
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
