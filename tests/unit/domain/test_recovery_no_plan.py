"""A recovery with nothing to plan on: the service is held for its model's files, or for
the limits that refuse it as it is, and says why."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize(
    "code",
    [
        ReasonCode.MODEL_NOT_PERMITTED,
        ReasonCode.CONTEXT_OVER_LIMIT,
        ReasonCode.WORKLOAD_QUOTA_EXHAUSTED,
    ],
)
def test_a_service_the_limits_now_refuse_is_held_for_the_limits_not_its_files(
    code: ReasonCode,
) -> None:
    refused = Refusal.of(code, "the organisation's policy refuses qwen as it is")
    decided = no_plan(service(name="chat"), refused)
    assert decided.held_reason is HeldReason.LIMITS
    assert decided.sentence == refused.sentence and decided.refusal == refused
