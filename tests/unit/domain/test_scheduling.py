"""Scheduling: exclusions, one path through admission and placement, drained machines skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.free_cards import SHOWN, FreeCards
from nodeau.domain.health import Health
from nodeau.domain.limits import OrgLimits
from nodeau.domain.marking import drain
from nodeau.domain.memory import GIB
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.plans import ENTERPRISE, PlanName, PlanTerms
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView, admit_and_place, exclusions, files_target
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from tests.support.builders.fleets import flat, fleet, gpu, machine, request

FLEET = fleet(
    machine("garage", gpu("G1", 24), gpu("G2", 24)),
    machine("attic", gpu("A1", 48)),
    machine("shed", gpu("S1", 24)),
)
HELD_G1 = Ledger(
    reservations=(Reservation(workload="x", machine="garage", gpu_uuid="G1", bytes=GIB),)
)


def view(**kw: object) -> FleetView:
    values: dict[str, object] = {
        "fleet": FLEET,
        "ledger": HELD_G1,
        "settings": SchedulingSettings(),
        "excluded": (),
        "verified_on": frozenset({"garage", "attic", "shed"}),
        "predict": flat(10 * GIB),
        "plan": ENTERPRISE,  # unbounded: these tests are about other rules
        **kw,
    }
    return FleetView(**values)  # type: ignore[arg-type]


def test_exclusions_say_why_for_each_machine() -> None:
    got = exclusions(
        machines=["a", "b", "c", "d", "e", "f"],
        drained=["a", "b"],
        health={
            "b": Health.UNREACHABLE,
            "c": Health.UNREACHABLE,
            "d": Health.UPGRADING,
            "e": Health.DEGRADED,
        },
        limits=OrgLimits(allowed_machines=frozenset({"a", "b", "c", "d", "e"})),
    )
    assert got == (
        ("a", "drained"),
        ("b", "drained"),  # the person's own mark is named first
        ("c", "unreachable"),
        ("d", "upgrading"),
        ("f", "outside the organisation's limits"),
    )


def test_a_degraded_or_reporting_machine_stays_a_candidate() -> None:
    assert (
        exclusions(
            machines=["a", "b"],
            drained=[],
            health={"a": Health.DEGRADED, "b": Health.REPORTING},
            limits=OrgLimits(),
        )
        == ()
    )


def test_admit_and_place_goes_through_both_decisions() -> None:
    p = admit_and_place(request(), view()).unwrap()
    assert (p.machine, p.gpu_uuid) == ("garage", "G2")  # pack: garage is half full
    spread = admit_and_place(
        request(), view(settings=SchedulingSettings(fleet_policy=Policy.SPREAD))
    ).unwrap()
    assert (spread.machine, spread.gpu_uuid) == ("shed", "S1")


def test_admission_refusal_passes_through_unchanged() -> None:
    refusal = admit_and_place(request(), view(predict=flat(60 * GIB))).failure()
    assert refusal.code is ReasonCode.NO_CARD_LARGE_ENOUGH


def test_excluded_machines_are_skipped() -> None:
    p = admit_and_place(request(), view(excluded=(("garage", "drained"),))).unwrap()
    assert (p.machine, p.gpu_uuid) == ("shed", "S1")
    assert p.excluded == (("garage", "drained"),)


def test_files_target_is_where_a_copy_would_let_it_run() -> None:
    v = view(verified_on=frozenset())
    assert admit_and_place(request(), v).failure().code is ReasonCode.NO_VERIFIED_COPY
    assert files_target(request(), v) == "garage"
    assert files_target(request(), view(verified_on=frozenset(), predict=flat(60 * GIB))) is None


@given(st.sampled_from(list(Policy)), st.sets(st.sampled_from(["garage", "attic", "shed"])))
def test_never_a_drained_machine_nor_a_held_card(policy: Policy, drained: set[str]) -> None:
    marks = frozenset()
    for m in sorted(drained):
        marks = drain(marks, m, running=0).drained
    v = view(
        settings=SchedulingSettings(fleet_policy=policy),
        excluded=tuple((m, "drained") for m in sorted(marks)),
    )
    match admit_and_place(request(), v):
        case Success(p):
            assert p.machine not in drained
            assert p.gpu_uuid != "G1"
        case Failure(refusal):
            assert refusal.code is ReasonCode.NO_ELIGIBLE_MACHINE
            assert drained == {"garage", "attic", "shed"}


def test_schedule_keeps_both_decisions() -> None:
    from nodeau.domain.scheduling import schedule

    scheduled = schedule(request(), view()).unwrap()
    assert scheduled.placement == admit_and_place(request(), view()).unwrap()
    assert [c.gpu_uuid for c in scheduled.admitted.candidates] == ["G2", "A1", "S1"]
    refused = schedule(
        request(), view(excluded=tuple((m, "drained") for m in ("garage", "attic", "shed")))
    )
    assert refused.failure().code is ReasonCode.NO_ELIGIBLE_MACHINE
    assert schedule(request(), view(predict=flat(60 * GIB))).failure().code is (
        ReasonCode.NO_CARD_LARGE_ENOUGH
    )


def test_a_plan_bound_counts_the_machines_holding_work_first() -> None:
    from nodeau.domain.scheduling import schedule

    one_machine = PlanTerms(name=PlanName.PRO, max_machines=1)
    # attic comes first by name; garage holds G1, so garage is the machine the plan covers
    scheduled = schedule(request(), view(plan=one_machine)).unwrap()
    assert scheduled.placement.gpu_uuid == "G2"
    assert dict(scheduled.placement.excluded) == {
        "attic": "beyond the Pro plan's 1 machines",
        "shed": "beyond the Pro plan's 1 machines",
    }


def test_a_fleet_of_as_many_cards_as_are_shown_weighs_every_card() -> None:
    from nodeau.domain.scheduling import schedule

    eight = fleet(machine("m", *(gpu(f"M{j}", 24 if j else 8) for j in range(SHOWN))))
    assert eight.card_count == SHOWN
    scheduled = schedule(
        request(), view(fleet=eight, ledger=Ledger(), verified_on=frozenset({"m"}))
    )
    admitted = scheduled.unwrap().admitted
    assert len(admitted.cards) == SHOWN
    assert [c.rejection for c in admitted.cards if c.gpu_uuid == "M0"] == [
        ReasonCode.CARD_TOO_SMALL
    ]


def test_the_admitted_workload_keeps_every_name_it_was_asked_by() -> None:
    from nodeau.domain.scheduling import scheduled_admission

    asked = evolve(request(), names=("qwen", "qwen2.5-7b"))
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    admission = scheduled_admission(
        asked,
        view(),
        kind=WorkloadKind.SERVICE,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=3),
        model_path=lambda m: f"/models/{m}/qwen.gguf",
        now=at,
    ).unwrap()
    assert admission.record.workload.names == ("qwen", "qwen2.5-7b")
    assert admission.record.model_path == "/models/garage/qwen.gguf"


def test_a_view_with_another_ledgers_index_is_refused_saying_so() -> None:
    index = FreeCards.of(FLEET, Ledger(), SchedulingSettings(), ENTERPRISE)
    with pytest.raises(ValueError) as refused:
        view(cards=index)
    assert str(refused.value) == "the free cards' index is not of this view's fleet and ledger"
