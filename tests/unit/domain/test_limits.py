"""Limits, quotas and permissions: exact refusals, their kinds, and the order they are checked."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from nodeau.domain.limits import (
    PERMISSIONS,
    Action,
    OrgLimits,
    OrgQuota,
    QuotaUsage,
    RequestShape,
    Role,
    check_limits,
    check_model_permitted,
    check_permission,
    check_quota,
    check_request,
    machine_allowed,
    may,
    model_permitted,
    roles_that_may,
)
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind

ASK = RequestShape(
    model="llama-3-8b", artifact_id="sha256:aa", context_tokens=8_192, model_bytes=5_000
)

asks = st.builds(
    RequestShape,
    model=st.sampled_from(["llama-3-8b", "qwen-7b"]),
    artifact_id=st.sampled_from(["sha256:aa", "sha256:bb"]),
    context_tokens=st.integers(min_value=1, max_value=200_000),
    model_bytes=st.integers(min_value=1, max_value=10**12),
    gpus=st.integers(min_value=1, max_value=8),
)
bound = st.none() | st.integers(min_value=1, max_value=10**12)
org_limits = st.builds(
    OrgLimits,
    max_context_tokens=bound,
    max_model_bytes=bound,
    allowed_models=st.none()
    | st.frozensets(st.sampled_from(["llama-3-8b", "qwen-7b", "sha256:aa", "sha256:bb"])),
    allowed_machines=st.none() | st.frozensets(st.sampled_from(["a", "b"])),
)
small = st.none() | st.integers(min_value=1, max_value=20)
quotas = st.builds(OrgQuota, max_gpus_held=small, max_workloads=small)
usages = st.builds(
    QuotaUsage,
    gpus_held=st.integers(min_value=0, max_value=20),
    workloads=st.integers(min_value=0, max_value=20),
)


def refused(code: ReasonCode, kind: RefusalKind, sentence: str) -> Failure[Refusal]:
    """The exact refusal expected, with its kind spelled out (not read off the code)."""
    return Failure(Refusal(kind=kind, code=code, sentence=sentence))


def test_codes_are_stable() -> None:
    assert [r.value for r in Role] == ["viewer", "operator", "admin"]
    assert [a.value for a in Action] == [
        "run",
        "stop",
        "drain",
        "set-policy",
        "set-recovery",
        "import-model",
        "pull-model",
        "invite-machine",
        "install-plan",
        "set-organisation",
        "mark-upgrading",
    ]


OPERATOR_ACTIONS = {"run", "stop", "set-recovery", "import-model", "pull-model"}


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("role", list(Role))
def test_permission_matrix(role: Role, action: Action) -> None:
    expected = {
        Role.VIEWER: False,
        Role.OPERATOR: action.value in OPERATOR_ACTIONS,
        Role.ADMIN: True,
    }[role]
    assert may(role, action) is expected
    assert (action in PERMISSIONS[role]) is expected


@pytest.mark.parametrize(
    ("action", "roles"),
    [
        (Action.RUN, (Role.OPERATOR, Role.ADMIN)),
        (Action.DRAIN, (Role.ADMIN,)),
        (Action.SET_POLICY, (Role.ADMIN,)),
        (Action.INVITE_MACHINE, (Role.ADMIN,)),
        (Action.MARK_UPGRADING, (Role.ADMIN,)),
        (Action.PULL_MODEL, (Role.OPERATOR, Role.ADMIN)),
    ],
)
def test_roles_that_may(action: Action, roles: tuple[Role, ...]) -> None:
    assert roles_that_may(action) == roles


@pytest.mark.parametrize(
    ("role", "action", "expected"),
    [
        (Role.ADMIN, Action.DRAIN, Success(None)),
        (Role.OPERATOR, Action.RUN, Success(None)),
        (
            Role.VIEWER,
            Action.RUN,
            refused(
                ReasonCode.ROLE_MAY_NOT,
                RefusalKind.PERMISSION,
                "The viewer role may not run; only operators and admins can.",
            ),
        ),
        (
            Role.OPERATOR,
            Action.DRAIN,
            refused(
                ReasonCode.ROLE_MAY_NOT,
                RefusalKind.PERMISSION,
                "The operator role may not drain; only admins can.",
            ),
        ),
        (
            Role.VIEWER,
            Action.SET_POLICY,
            refused(
                ReasonCode.ROLE_MAY_NOT,
                RefusalKind.PERMISSION,
                "The viewer role may not set-policy; only admins can.",
            ),
        ),
    ],
)
def test_check_permission(role: Role, action: Action, expected: Result[None, Refusal]) -> None:
    assert check_permission(role, action) == expected


@given(st.sampled_from(Action))
def test_roles_are_nested(action: Action) -> None:
    assert may(Role.VIEWER, action) <= may(Role.OPERATOR, action) <= may(Role.ADMIN, action)
    assert may(Role.ADMIN, action) is True


@given(st.sampled_from(Role), st.sampled_from(Action))
def test_permission_refusals_are_permission_kind(role: Role, action: Action) -> None:
    match check_permission(role, action):
        case Success(value):
            assert value is None
            assert may(role, action) is True
        case Failure(refusal):
            assert may(role, action) is False
            assert (refusal.kind, refusal.code) == (RefusalKind.PERMISSION, ReasonCode.ROLE_MAY_NOT)


@pytest.mark.parametrize(
    ("allowed", "name", "expected"),
    [
        (None, "anything", True),
        (frozenset({"a", "b"}), "a", True),
        (frozenset({"a", "b"}), "c", False),
        (frozenset(), "a", False),
    ],
)
def test_machine_allowed(allowed: frozenset[str] | None, name: str, expected: bool) -> None:
    assert machine_allowed(OrgLimits(allowed_machines=allowed), name) is expected


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        (None, True),
        (frozenset({"llama-3-8b"}), True),
        (frozenset({"sha256:aa"}), True),
        (frozenset({"qwen-7b", "sha256:bb"}), False),
        (frozenset(), False),
    ],
)
def test_model_permitted_by_name_or_artifact(
    allowed: frozenset[str] | None, expected: bool
) -> None:
    limits = OrgLimits(allowed_models=allowed)
    assert model_permitted(limits, ASK) is expected
    outcome = check_model_permitted(ASK, limits)
    if expected:
        assert outcome == Success(None)
    else:
        assert outcome == refused(
            ReasonCode.MODEL_NOT_PERMITTED,
            RefusalKind.PERMISSION,
            "The organisation does not permit model llama-3-8b (artifact sha256:aa);"
            " an admin can add it.",
        )


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (OrgLimits.unbounded(), Success(None)),
        (OrgLimits(max_context_tokens=8_192, max_model_bytes=5_000), Success(None)),
        (
            OrgLimits(max_context_tokens=8_191),
            refused(
                ReasonCode.CONTEXT_OVER_LIMIT,
                RefusalKind.LIMIT,
                "The request asks for a context of 8192 tokens and the organisation's limit"
                " is 8191.",
            ),
        ),
        (
            OrgLimits(max_model_bytes=4_999),
            refused(
                ReasonCode.MODEL_SIZE_OVER_LIMIT,
                RefusalKind.LIMIT,
                "Model llama-3-8b is 5000 bytes and the organisation's limit is 4999 bytes.",
            ),
        ),
        (
            OrgLimits(max_context_tokens=1, max_model_bytes=1),
            refused(
                ReasonCode.CONTEXT_OVER_LIMIT,
                RefusalKind.LIMIT,
                "The request asks for a context of 8192 tokens and the organisation's limit is 1.",
            ),
        ),
    ],
)
def test_check_limits(limits: OrgLimits, expected: Result[None, Refusal]) -> None:
    assert check_limits(ASK, limits) == expected


def gpus(n: int) -> RequestShape:
    return RequestShape(
        model="llama-3-8b", artifact_id="sha256:aa", context_tokens=1, model_bytes=1, gpus=n
    )


@pytest.mark.parametrize(
    ("ask", "quota", "usage", "expected"),
    [
        (gpus(1), OrgQuota.unbounded(), QuotaUsage(gpus_held=999, workloads=999), Success(None)),
        (gpus(2), OrgQuota(max_gpus_held=8), QuotaUsage(gpus_held=6), Success(None)),
        (
            gpus(3),
            OrgQuota(max_gpus_held=8),
            QuotaUsage(gpus_held=6),
            refused(
                ReasonCode.GPU_QUOTA_EXHAUSTED,
                RefusalKind.QUOTA,
                "The organisation holds 6 of its 8 GPUs and this asks for 3;"
                " stopping a workload frees quota.",
            ),
        ),
        (gpus(1), OrgQuota(max_workloads=4), QuotaUsage(workloads=3), Success(None)),
        (
            gpus(1),
            OrgQuota(max_workloads=4),
            QuotaUsage(workloads=4),
            refused(
                ReasonCode.WORKLOAD_QUOTA_EXHAUSTED,
                RefusalKind.QUOTA,
                "The organisation runs 4 of its 4 workloads; stopping a workload frees quota.",
            ),
        ),
        (
            gpus(1),
            OrgQuota(max_gpus_held=1, max_workloads=1),
            QuotaUsage(gpus_held=1, workloads=1),
            refused(
                ReasonCode.GPU_QUOTA_EXHAUSTED,
                RefusalKind.QUOTA,
                "The organisation holds 1 of its 1 GPUs and this asks for 1;"
                " stopping a workload frees quota.",
            ),
        ),
    ],
)
def test_check_quota(
    ask: RequestShape, quota: OrgQuota, usage: QuotaUsage, expected: Result[None, Refusal]
) -> None:
    assert check_quota(ask, quota, usage) == expected


STRICT_LIMITS = OrgLimits(max_context_tokens=1, allowed_models=frozenset({"qwen-7b"}))
FULL_QUOTA = OrgQuota(max_workloads=1)
FULL_USAGE = QuotaUsage(workloads=1)


@pytest.mark.parametrize(
    ("role", "limits", "quota", "expected_code"),
    [
        (Role.VIEWER, STRICT_LIMITS, FULL_QUOTA, ReasonCode.ROLE_MAY_NOT),
        (Role.OPERATOR, STRICT_LIMITS, FULL_QUOTA, ReasonCode.MODEL_NOT_PERMITTED),
        (
            Role.OPERATOR,
            OrgLimits(max_context_tokens=1),
            FULL_QUOTA,
            ReasonCode.CONTEXT_OVER_LIMIT,
        ),
        (Role.ADMIN, OrgLimits.unbounded(), FULL_QUOTA, ReasonCode.WORKLOAD_QUOTA_EXHAUSTED),
        (Role.ADMIN, OrgLimits.unbounded(), OrgQuota.unbounded(), None),
    ],
)
def test_check_request_order_is_permission_limit_quota(
    role: Role, limits: OrgLimits, quota: OrgQuota, expected_code: ReasonCode | None
) -> None:
    outcome = check_request(role, ASK, limits, quota, FULL_USAGE)
    match outcome:
        case Success(value):
            assert expected_code is None
            assert value is None
        case Failure(refusal):
            assert refusal.code is expected_code


# The oracle of the properties below, written from the module's rules and not from its
# helpers: each rule judged on its own, with the plainest arithmetic, and each code's kind
# spelled out. Listed in the order check_request meets them: who asks, then the request's
# shape, then the budget that running workloads spend.
KINDS = {
    ReasonCode.ROLE_MAY_NOT: RefusalKind.PERMISSION,
    ReasonCode.MODEL_NOT_PERMITTED: RefusalKind.PERMISSION,
    ReasonCode.CONTEXT_OVER_LIMIT: RefusalKind.LIMIT,
    ReasonCode.MODEL_SIZE_OVER_LIMIT: RefusalKind.LIMIT,
    ReasonCode.GPU_QUOTA_EXHAUSTED: RefusalKind.QUOTA,
    ReasonCode.WORKLOAD_QUOTA_EXHAUSTED: RefusalKind.QUOTA,
}


def broken_rules(
    role: Role, ask: RequestShape, limits: OrgLimits, quota: OrgQuota, usage: QuotaUsage
) -> list[ReasonCode]:
    """Every rule the request breaks, in the order they are checked."""
    broken = set()
    if role is Role.VIEWER:  # a viewer changes nothing; operators and admins may run
        broken.add(ReasonCode.ROLE_MAY_NOT)
    names = {ask.model, ask.artifact_id}
    if limits.allowed_models is not None and not names & limits.allowed_models:
        broken.add(ReasonCode.MODEL_NOT_PERMITTED)
    if limits.max_context_tokens is not None and ask.context_tokens > limits.max_context_tokens:
        broken.add(ReasonCode.CONTEXT_OVER_LIMIT)
    if limits.max_model_bytes is not None and ask.model_bytes > limits.max_model_bytes:
        broken.add(ReasonCode.MODEL_SIZE_OVER_LIMIT)
    if quota.max_gpus_held is not None and quota.max_gpus_held - usage.gpus_held < ask.gpus:
        broken.add(ReasonCode.GPU_QUOTA_EXHAUSTED)  # fewer GPUs left than asked for
    if quota.max_workloads is not None and usage.workloads >= quota.max_workloads:
        broken.add(ReasonCode.WORKLOAD_QUOTA_EXHAUSTED)  # no workload left to start
    return [code for code in KINDS if code in broken]


def refusal_code(outcome: Result[None, Refusal]) -> ReasonCode | None:
    """The code ``outcome`` refuses with (its kind checked against ``KINDS``); None if none."""
    match outcome:
        case Success(value):
            assert value is None
            return None
        case Failure(refusal):
            assert refusal.kind is KINDS[refusal.code]
            return refusal.code
    raise AssertionError(outcome)


def first(codes: list[ReasonCode], *among: ReasonCode) -> ReasonCode | None:
    return next((code for code in codes if code in among), None)


@given(st.sampled_from(Role), asks, org_limits, quotas, usages)
def test_each_check_refuses_with_the_first_rule_of_its_own_that_is_broken(
    role: Role, ask: RequestShape, limits: OrgLimits, quota: OrgQuota, usage: QuotaUsage
) -> None:
    broken = broken_rules(role, ask, limits, quota, usage)
    assert refusal_code(check_permission(role, Action.RUN)) == first(
        broken, ReasonCode.ROLE_MAY_NOT
    )
    assert refusal_code(check_model_permitted(ask, limits)) == first(
        broken, ReasonCode.MODEL_NOT_PERMITTED
    )
    assert refusal_code(check_limits(ask, limits)) == first(
        broken, ReasonCode.CONTEXT_OVER_LIMIT, ReasonCode.MODEL_SIZE_OVER_LIMIT
    )
    assert refusal_code(check_quota(ask, quota, usage)) == first(
        broken, ReasonCode.GPU_QUOTA_EXHAUSTED, ReasonCode.WORKLOAD_QUOTA_EXHAUSTED
    )


@given(asks, st.sampled_from([Role.OPERATOR, Role.ADMIN]), usages)
def test_an_ask_within_every_bound_is_accepted(
    ask: RequestShape, role: Role, usage: QuotaUsage
) -> None:
    limits = OrgLimits(
        max_context_tokens=ask.context_tokens,
        max_model_bytes=ask.model_bytes,
        allowed_models=frozenset({ask.artifact_id}),
    )
    quota = OrgQuota(max_gpus_held=usage.gpus_held + ask.gpus, max_workloads=usage.workloads + 1)
    assert check_request(role, ask, limits, quota, usage) == Success(None)


@given(asks, usages, st.integers(min_value=1, max_value=20))
def test_usage_plus_ask_over_gpu_quota_is_refused_as_quota(
    ask: RequestShape, usage: QuotaUsage, most: int
) -> None:
    assume(usage.gpus_held + ask.gpus > most)
    refusal = check_quota(ask, OrgQuota(max_gpus_held=most), usage).failure()
    assert (refusal.kind, refusal.code) == (RefusalKind.QUOTA, ReasonCode.GPU_QUOTA_EXHAUSTED)


@given(asks, usages, st.integers(min_value=1, max_value=20))
def test_usage_at_workload_quota_is_refused_as_quota(
    ask: RequestShape, usage: QuotaUsage, most: int
) -> None:
    assume(usage.workloads >= most)
    refusal = check_quota(ask, OrgQuota(max_workloads=most), usage).failure()
    assert (refusal.kind, refusal.code) == (RefusalKind.QUOTA, ReasonCode.WORKLOAD_QUOTA_EXHAUSTED)


@given(st.sampled_from(Role), asks, org_limits, quotas, usages)
def test_check_request_refuses_with_the_first_broken_rule_in_order(
    role: Role, ask: RequestShape, limits: OrgLimits, quota: OrgQuota, usage: QuotaUsage
) -> None:
    broken = broken_rules(role, ask, limits, quota, usage)
    expected = broken[0] if broken else None
    assert refusal_code(check_request(role, ask, limits, quota, usage)) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"context_tokens": 0}, "context_tokens must be positive, got 0"),
        ({"model_bytes": 0}, "model_bytes must be positive, got 0"),
        ({"gpus": 0}, "gpus must be positive, got 0"),
        ({"model": " "}, "a workload asks for a named model and an artifact id"),
        ({"artifact_id": ""}, "a workload asks for a named model and an artifact id"),
    ],
)
def test_impossible_asks(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "model": "m",
        "artifact_id": "sha256:aa",
        "context_tokens": 1,
        "model_bytes": 1,
    }
    with pytest.raises(ValueError, match=rf"^{message}$"):
        RequestShape(**{**base, **kwargs})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: OrgLimits(max_context_tokens=0),
            "max_context_tokens must be positive or absent, got 0",
        ),
        (
            lambda: OrgLimits(max_model_bytes=-1),
            "max_model_bytes must be positive or absent, got -1",
        ),
        (lambda: OrgQuota(max_gpus_held=0), "max_gpus_held must be positive or absent, got 0"),
        (lambda: OrgQuota(max_workloads=0), "max_workloads must be positive or absent, got 0"),
        (lambda: QuotaUsage(gpus_held=-1), "gpus_held must not be negative, got -1"),
        (lambda: QuotaUsage(workloads=-1), "workloads must not be negative, got -1"),
    ],
)
def test_impossible_bounds_and_usage(build: object, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^{message}$"):
        build()  # type: ignore[operator]


def test_smallest_legal_values() -> None:
    assert OrgLimits(max_context_tokens=1, max_model_bytes=1).max_context_tokens == 1
    assert OrgQuota(max_gpus_held=1, max_workloads=1).max_workloads == 1
    assert QuotaUsage() == QuotaUsage(gpus_held=0, workloads=0)
    assert gpus(1).gpus == 1
    assert RequestShape(model="m", artifact_id="a", context_tokens=1, model_bytes=1).gpus == 1
