"""A recovery's copy needs at their edges (domain/recovery.py): only an automatic service
holding a card needs a copy elsewhere; a card exactly as large as the prediction fits, and
each card model gets its own prediction; a hold is written with the moment it began, and
a decision to hold without a reason writes nothing; the fleet-wide alarm sounds only when
more than half of a fleet of two or more is unreachable."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from nodeau.domain.memory import GIB, Prediction, Source, Term
from nodeau.domain.recovery import (
    CopyNeed,
    RecoveryAction,
    RecoveryDecision,
    copy_need,
    fleet_alarm,
    held_as,
    machines_that_fit,
)
from nodeau.domain.workloads import HeldReason, RecoveryMode, WorkloadKind, WorkloadState
from tests.unit.domain.fleets import fleet, gpu, machine
from tests.unit.domain.test_recovery import GONE, REPORTING, T0, service, unreachable_since, view

ALL = frozenset({"garage", "attic", "cp"})


def test_only_an_automatic_service_holding_a_card_needs_a_copy() -> None:
    assert copy_need(service(recovery_mode=RecoveryMode.NEVER), ALL, view()) is None
    assert copy_need(service(state=WorkloadState.STOPPED), ALL, view()) is None
    job = service(
        kind=WorkloadKind.BATCH, state=WorkloadState.RUNNING, recovery_mode=RecoveryMode.NEVER
    )
    assert copy_need(job, ALL, view()) is None
    assert copy_need(service(), ALL, view()) == CopyNeed(
        workload="svc",
        artifact="a" * 64,
        name="qwen",
        fits_on=frozenset({"attic", "cp"}),
        verified_on=frozenset({"garage", "attic", "cp"}),
    )


def by_model(total: dict[str, int]) -> Callable[[str], Prediction]:
    def predict(model: str) -> Prediction:
        term = Term(name="peak", bytes=total[model], source=Source.ESTIMATED, basis="test")
        return Prediction(terms=(term,), source=Source.ESTIMATED)

    return predict


def test_a_card_exactly_as_large_as_its_models_prediction_fits() -> None:
    cards = fleet(
        machine("a", gpu("A1", 24, model="NVIDIA L4")),
        machine("b", gpu("B1", 16, model="NVIDIA T4")),
        machine("c", gpu("C1", 16, model="NVIDIA A2")),
    )
    predict = by_model({"NVIDIA L4": 24 * GIB, "NVIDIA T4": 16 * GIB, "NVIDIA A2": 17 * GIB})
    assert machines_that_fit(view(fleet=cards, predict=predict)) == frozenset({"a", "b"})


def test_a_hold_is_written_since_the_moment_given() -> None:
    hold = RecoveryDecision(
        workload="svc",
        action=RecoveryAction.HOLD,
        held_reason=HeldReason.CAPACITY,
        sentence="no other machine has a free card",
    )
    since = T0 - timedelta(minutes=7)
    held = held_as(service(), hold, since)
    assert held is not None
    assert (held.state, held.since, held.held_reason) == (
        WorkloadState.HELD,
        since,
        HeldReason.CAPACITY,
    )


def test_a_hold_without_a_reason_writes_nothing() -> None:
    reasonless = RecoveryDecision(
        workload="svc", action=RecoveryAction.HOLD, sentence="held, for no reason given"
    )
    assert held_as(service(), reasonless, T0) is None


def test_the_fleet_alarm_sounds_only_past_half_the_fleet_and_never_for_one_machine() -> None:
    quiet = unreachable_since(GONE)
    assert fleet_alarm({"m1": quiet}) is None
    assert fleet_alarm({"m1": quiet, "m2": quiet, "m3": REPORTING, "m4": REPORTING}) is None
    assert fleet_alarm({"m1": quiet, "m2": quiet, "m3": quiet, "m4": REPORTING}) == (
        "3 of 4 machines are unreachable at once (more than half): Nodeau suspects the "
        "network or its control plane, not the machines, and moves nothing until at least "
        "half of the fleet answers"
    )
