"""The organisation's refusals written out whole (domain/organisation.py): who may take an
action, when no one or several hold those roles; a requester without a name; a quota met
by a run that fits it."""

from __future__ import annotations

import re
from types import MappingProxyType

import pytest
from returns.result import Failure, Success

from nodeau.domain.limits import Action, OrgQuota, RequestShape, Role
from nodeau.domain.organisation import Organisation, Requester, check_action, check_run
from nodeau.domain.refusals import ReasonCode, Refusal

BOB = Requester(user="bob")
ASK = RequestShape(model="qwen", artifact_id="ab" * 32, context_tokens=4096, model_bytes=10**9)


def test_a_refusal_when_no_one_holds_the_roles_that_may_names_only_the_roles() -> None:
    assert check_action(Organisation(), BOB, Action.RUN) == Failure(
        Refusal.of(
            ReasonCode.ROLE_MAY_NOT,
            "bob has the viewer role, which may not run; only operators and admins can, "
            "by the organisation's policy",
        )
    )


def test_a_refusal_names_everyone_who_holds_the_roles_that_may() -> None:
    roles = MappingProxyType({Role.ADMIN: frozenset({"group:ops", "alice"})})
    assert check_action(Organisation(roles=roles), BOB, Action.DRAIN) == Failure(
        Refusal.of(
            ReasonCode.ROLE_MAY_NOT,
            "bob has the viewer role, which may not drain; only admins (alice, group:ops) can, "
            "by the organisation's policy",
        )
    )


def test_a_requester_has_a_user_name() -> None:
    with pytest.raises(ValueError, match=f"^{re.escape('a requester has a user name')}$"):
        Requester(user=" ")


def test_a_run_that_fits_the_persons_quota_is_let_through() -> None:
    alice = Requester(user="alice")
    policy = Organisation(
        roles=MappingProxyType({Role.OPERATOR: frozenset({"alice"})}),
        user_quotas=MappingProxyType({"alice": OrgQuota(max_gpus_held=4, max_workloads=2)}),
    )
    assert check_run(policy, alice, ASK, []) == Success(None)
