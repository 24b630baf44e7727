"""A recovery with nothing to plan on: the service is held for its model's files, or for
the limits that refuse it as it is, and says why."""

from __future__ import annotations

from nodeau.domain.recovery import RecoveryAction, no_plan
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.workloads import HeldReason
from tests.support.builders.recovery_inputs import service

GONE = Refusal.of(
    ReasonCode.NO_VERIFIED_COPY,
    "qwen: no machine in the fleet holds a verified copy of a model by that name",
)


def test_a_service_whose_model_is_nowhere_is_held_for_its_files() -> None:
    decided = no_plan(service(name="chat"), GONE)
    assert decided.workload == "chat"
    assert decided.action is RecoveryAction.HOLD
    assert decided.held_reason is HeldReason.MODEL_FILES
    assert decided.sentence == (
        "qwen: no machine in the fleet holds a verified copy of a model by that name"
    )
    assert decided.refusal == GONE
    assert (decided.placement, decided.fetch_copy_to, decided.fires_at) == (None, None, None)


def test_a_service_the_limits_now_refuse_is_held_for_the_limits_not_its_files() -> None:
    not_permitted = Refusal.of(
        ReasonCode.MODEL_NOT_PERMITTED, "qwen is not among the models the organisation permits"
    )
    decided = no_plan(service(name="chat"), not_permitted)
    assert decided.held_reason is HeldReason.LIMITS
    assert decided.sentence == not_permitted.sentence and decided.refusal == not_permitted
