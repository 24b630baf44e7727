"""Who asked, on the fleet (domain/organisation.py ``check_requester``): the refusal of a
request that does not say, word for word, and the person's GPU quota checked against what
the request asks; no policy is an unconfigured one."""

from __future__ import annotations

from types import MappingProxyType

from returns.result import Failure, Success

from nodeau.domain.limits import OrgQuota, Role
from nodeau.domain.organisation import Organisation, Spending, check_requester
from nodeau.domain.refusals import ReasonCode
from tests.unit.domain.test_organisation import ALICE, ASK


def test_a_request_that_does_not_say_who_asked_is_refused_in_these_words() -> None:
    policy = Organisation(everyone=Role.OPERATOR, contact="#gpu")
    refused = check_requester(policy, None, ASK, [])
    assert isinstance(refused, Failure)
    assert refused.failure().code is ReasonCode.REQUESTER_UNKNOWN
    assert refused.failure().sentence == (
        "qwen was asked for without saying who asked, and the organisation's policy needs "
        "to know (nodeau run and nodeau batch submit say so; an object applied by hand "
        "needs spec.requester); ask #gpu."
    )


def test_the_persons_gpu_quota_is_checked_against_what_the_request_asks() -> None:
    policy = Organisation(
        everyone=Role.OPERATOR,
        user_quotas=MappingProxyType({"alice": OrgQuota(max_gpus_held=2)}),
    )
    assert check_requester(policy, ALICE, ASK, [Spending(requester=ALICE)]) == Success(None)
    full = [Spending(requester=ALICE)] * 2
    refused = check_requester(policy, ALICE, ASK, full)
    assert isinstance(refused, Failure)
    assert refused.failure().code is ReasonCode.GPU_QUOTA_EXHAUSTED


def test_no_policy_is_one_not_configured() -> None:
    assert Organisation.none().configured is False
