"""The organisation's policy: whose role, whose quota, which "no"; and the plan's scope."""

from __future__ import annotations

from types import MappingProxyType

from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.limits import Action, OrgLimits, OrgQuota, RequestShape, Role
from nodeau.domain.organisation import (
    Organisation,
    Requester,
    Spending,
    check_action,
    check_quotas,
    check_run,
    check_shape,
    role_of,
    usage_of,
)
from nodeau.domain.plans import HOME, PLANS, PlanName, plan_scope
from nodeau.domain.refusals import ReasonCode, RefusalKind

ALICE = Requester(user="alice", groups=frozenset({"ml", "staff"}))
BOB = Requester(user="bob", groups=frozenset({"ml"}))
ASK = RequestShape(model="qwen", artifact_id="ab" * 32, context_tokens=4096, model_bytes=10**9)


def org(**kw: object) -> Organisation:
    return Organisation(**kw)  # type: ignore[arg-type]


def test_no_policy_makes_everybody_an_admin_and_limits_nothing() -> None:
    none = Organisation.none()
    assert role_of(none, ALICE) is Role.ADMIN
    assert all(check_action(none, ALICE, a) == Success(None) for a in Action)
    spent = [Spending(requester=ALICE)] * 50
    assert check_run(none, ALICE, ASK, spent) == Success(None)
    assert check_run(none, None, ASK, spent) == Success(None)


def test_the_most_powerful_role_naming_the_person_or_a_group_wins() -> None:
    roles = MappingProxyType(
        {Role.OPERATOR: frozenset({"group:ml"}), Role.ADMIN: frozenset({"alice"})}
    )
    policy = org(roles=roles)
    assert role_of(policy, ALICE) is Role.ADMIN
    assert role_of(policy, BOB) is Role.OPERATOR
    assert role_of(policy, Requester(user="eve")) is Role.VIEWER  # everyone: viewer
    assert role_of(org(roles=roles, everyone=Role.OPERATOR), Requester(user="eve")) is Role.OPERATOR


def test_a_permission_refusal_names_the_roles_that_may_and_who_holds_them() -> None:
    policy = org(roles=MappingProxyType({Role.ADMIN: frozenset({"group:ops"})}), contact="#gpu")
    refused = check_action(policy, BOB, Action.DRAIN)
    assert isinstance(refused, Failure)
    r = refused.failure()
    assert (r.kind, r.code) == (RefusalKind.PERMISSION, ReasonCode.ROLE_MAY_NOT)
    assert r.sentence == (
        "bob has the viewer role, which may not drain; only admins (group:ops) can, by the "
        "organisation's policy; ask #gpu."
    )


def test_quotas_are_counted_per_person_and_per_team_and_the_refusal_says_whose() -> None:
    policy = org(
        everyone=Role.OPERATOR,
        user_quotas=MappingProxyType({"alice": OrgQuota(max_workloads=3)}),
        team_quotas=MappingProxyType({"ml": OrgQuota(max_gpus_held=2)}),
    )
    one_each = [Spending(requester=ALICE), Spending(requester=BOB)]
    refused = check_quotas(policy, ALICE, ASK, one_each)
    assert isinstance(refused, Failure)
    r = refused.failure()
    assert (r.kind, r.code) == (RefusalKind.QUOTA, ReasonCode.GPU_QUOTA_EXHAUSTED)
    assert r.sentence == (
        "Team ml holds 2 of its 2 GPUs and this asks for 1; stopping a workload frees quota."
    )
    # alone, alice has room on both
    assert check_quotas(policy, ALICE, ASK, [Spending(requester=ALICE)]) == Success(None)
    # her own quota first: three of her own workloads
    mine = [Spending(requester=Requester(user="alice"))] * 3
    own = check_quotas(policy, ALICE, ASK, mine)
    assert isinstance(own, Failure)
    assert own.failure().sentence == (
        "User alice runs 3 of its 3 workloads; stopping a workload frees quota."
    )
    # workloads recorded before requesters were count for nobody
    assert check_quotas(policy, ALICE, ASK, [Spending(requester=None)] * 9) == Success(None)


@given(
    users=st.lists(st.sampled_from(["alice", "bob", "carol"]), max_size=30),
    team=st.sampled_from(["ml", "staff", "ops"]),
)
def test_usage_counts_exactly_the_workloads_of_the_subject(users: list[str], team: str) -> None:
    groups = {"alice": {"ml", "staff"}, "bob": {"ml"}, "carol": {"ops"}}
    spent = [Spending(requester=Requester(user=u, groups=frozenset(groups[u]))) for u in users]
    assert usage_of(spent, user="alice", team=None).workloads == users.count("alice")
    members = sum(1 for u in users if team in groups[u])
    assert usage_of(spent, user=None, team=team).gpus_held == members


def test_run_checks_permission_then_limits_then_quota() -> None:
    policy = org(
        everyone=Role.OPERATOR,
        limits=OrgLimits(max_context_tokens=2048, allowed_models=frozenset({"llama"})),
        team_quotas=MappingProxyType({"ml": OrgQuota(max_workloads=1)}),
    )
    spent = [Spending(requester=BOB)]
    first = check_run(policy, ALICE, ASK, spent)
    assert isinstance(first, Failure)
    assert first.failure().code is ReasonCode.MODEL_NOT_PERMITTED  # a permission, first
    allowed = org(
        everyone=Role.OPERATOR,
        limits=OrgLimits(max_context_tokens=2048),
        team_quotas=policy.team_quotas,
    )
    second = check_run(allowed, ALICE, ASK, spent)
    assert isinstance(second, Failure)
    assert second.failure().code is ReasonCode.CONTEXT_OVER_LIMIT  # then the limit
    fits = org(everyone=Role.OPERATOR, team_quotas=policy.team_quotas)
    third = check_run(fits, ALICE, ASK, spent)
    assert isinstance(third, Failure)
    assert third.failure().code is ReasonCode.WORKLOAD_QUOTA_EXHAUSTED  # then the quota


def test_under_a_policy_the_fleet_needs_to_know_who_asked() -> None:
    policy = org(everyone=Role.OPERATOR)
    refused = check_run(policy, None, ASK, [])
    assert isinstance(refused, Failure)
    assert refused.failure().code is ReasonCode.REQUESTER_UNKNOWN
    assert check_run(policy, ALICE, ASK, []) == Success(None)


def test_the_plan_covers_machines_by_name_and_cards_in_order() -> None:
    machines = [
        ("c", ("c0",)),
        ("a", ("a0", "a1", "a2", "a3", "a4")),
        ("b", ("b0", "b1", "b2", "b3")),
    ]
    scope = plan_scope(HOME, machines)  # 2 machines, 8 GPUs: a (5 cards) then b (3 of 4)
    assert scope.covered_gpus == {"a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2"}
    assert scope.left_out == (("c", "beyond the Home plan's 2 machines"),)
    assert scope.gpus_left_out == 1
    unbounded = plan_scope(PLANS[PlanName.ENTERPRISE], machines)
    assert len(unbounded.covered_gpus) == 10 and unbounded.left_out == ()


@given(st.lists(st.integers(min_value=0, max_value=12), max_size=12))
def test_the_plan_never_covers_more_than_its_bounds(cards: list[int]) -> None:
    machines = [
        (f"m{i:02d}", tuple(f"m{i:02d}-{j}" for j in range(n))) for i, n in enumerate(cards)
    ]
    scope = plan_scope(HOME, machines)
    assert len(scope.covered_gpus) <= 8
    covered_machines = {g.split("-")[0] for g in scope.covered_gpus}
    assert len(covered_machines) <= 2
    # nothing is left out while room remains: the cover is as large as the bounds allow
    total = sum(cards[:2])
    assert len(scope.covered_gpus) == min(8, total)


def test_a_request_that_does_not_say_who_asked_is_refused_in_these_words() -> None:
    policy = Organisation(everyone=Role.OPERATOR, contact="#gpu")
    refused = check_run(policy, None, ASK, [])
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
    assert check_run(policy, ALICE, ASK, [Spending(requester=ALICE)]) == Success(None)
    full = [Spending(requester=ALICE)] * 2
    refused = check_run(policy, ALICE, ASK, full)
    assert isinstance(refused, Failure)
    assert refused.failure().code is ReasonCode.GPU_QUOTA_EXHAUSTED


def test_no_policy_is_one_not_configured() -> None:
    assert Organisation.none().configured is False


def test_a_held_workloads_shape_meets_the_limits_and_the_models_permitted_only() -> None:
    policy = Organisation(
        everyone=Role.VIEWER,  # a role that may not run: its shape is all that is read
        limits=OrgLimits(max_context_tokens=1024, allowed_models=frozenset({"qwen"})),
        contact="#gpu",
    )
    assert check_shape(policy, evolve(ASK, context_tokens=1024)) == Success(None)
    too_long = check_shape(policy, evolve(ASK, context_tokens=2048))
    assert too_long.failure().code is ReasonCode.CONTEXT_OVER_LIMIT
    assert too_long.failure().sentence.endswith("; ask #gpu.")
    other = check_shape(policy, evolve(ASK, model="llama", artifact_id="cd" * 32))
    assert other.failure().code is ReasonCode.MODEL_NOT_PERMITTED
    assert other.failure().sentence.endswith("; ask #gpu.")
