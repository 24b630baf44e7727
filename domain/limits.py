"""Organisation limits, quotas and permissions: three different "no"s, never confused.

Why it is so: docs/adr/decisions/domain.md (limits.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from attrs import field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.checks import not_negative, positive, positive_or_none
from nodeau.domain.refusals import ReasonCode, Refusal


class Role(str, enum.Enum):
    """A person's role in the organisation, least powerful first."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Action(str, enum.Enum):
    """Something a person asks Nodeau to do that changes state."""

    RUN = "run"
    STOP = "stop"
    DRAIN = "drain"
    SET_POLICY = "set-policy"
    SET_RECOVERY = "set-recovery"
    IMPORT_MODEL = "import-model"
    PULL_MODEL = "pull-model"
    INVITE_MACHINE = "invite-machine"
    INSTALL_PLAN = "install-plan"
    SET_ORGANISATION = "set-organisation"
    MARK_UPGRADING = "mark-upgrading"  # a machine mark, as drain is: admins only


_OPERATOR_ACTIONS = frozenset(
    {Action.RUN, Action.STOP, Action.SET_RECOVERY, Action.IMPORT_MODEL, Action.PULL_MODEL}
)

PERMISSIONS: Mapping[Role, frozenset[Action]] = MappingProxyType(
    {
        Role.VIEWER: frozenset(),
        Role.OPERATOR: _OPERATOR_ACTIONS,
        Role.ADMIN: frozenset(Action),
    }
)


def may(role: Role, action: Action) -> bool:
    """Whether ``role`` may take ``action``."""
    return action in PERMISSIONS[role]


def roles_that_may(action: Action) -> tuple[Role, ...]:
    """The roles that may take ``action``, least powerful first."""
    return tuple(role for role in Role if may(role, action))


def check_permission(role: Role, action: Action) -> Result[None, Refusal]:
    """Whether ``role`` may take ``action``; the refusal says which roles can."""
    if may(role, action):
        return Success(None)
    who = " and ".join(f"{r.value}s" for r in roles_that_may(action))
    return Failure(
        Refusal.of(
            ReasonCode.ROLE_MAY_NOT,
            f"The {role.value} role may not {action.value}; only {who} can.",
        )
    )


@frozen(kw_only=True)
class OrgLimits:
    """Fixed bounds on a request's shape; ``None`` means no bound.

    ``allowed_models`` holds model names and artifact ids: a name permits
    whatever artifact the name resolves to, an artifact id pins the bytes.
    Machines outside ``allowed_machines`` are simply not candidates.
    """

    max_context_tokens: int | None = field(default=None, validator=positive_or_none)
    max_model_bytes: int | None = field(default=None, validator=positive_or_none)
    allowed_models: frozenset[str] | None = None
    allowed_machines: frozenset[str] | None = None

    @classmethod
    def unbounded(cls) -> OrgLimits:
        """No limits at all (an organisation that configured none)."""
        return cls()


@frozen(kw_only=True)
class OrgQuota:
    """Budgets spent by what is running; ``None`` means no budget."""

    max_gpus_held: int | None = field(default=None, validator=positive_or_none)
    max_workloads: int | None = field(default=None, validator=positive_or_none)

    @classmethod
    def unbounded(cls) -> OrgQuota:
        """No quota at all."""
        return cls()


@frozen(kw_only=True)
class QuotaUsage:
    """What the organisation's running workloads hold right now."""

    gpus_held: int = field(default=0, validator=not_negative)
    workloads: int = field(default=0, validator=not_negative)


@frozen(kw_only=True)
class RequestShape:
    """What a request to run a workload asks for."""

    model: str
    artifact_id: str
    context_tokens: int = field(validator=positive)
    model_bytes: int = field(validator=positive)
    gpus: int = field(default=1, validator=positive)

    def __attrs_post_init__(self) -> None:
        if not self.model.strip() or not self.artifact_id.strip():
            raise ValueError("a workload asks for a named model and an artifact id")


def machine_allowed(limits: OrgLimits, name: str) -> bool:
    """Whether the machine called ``name`` may be a candidate for placement."""
    return limits.allowed_machines is None or name in limits.allowed_machines


def model_permitted(limits: OrgLimits, ask: RequestShape) -> bool:
    """Whether the organisation permits the asked model, by name or by artifact id."""
    allowed = limits.allowed_models
    return allowed is None or ask.model in allowed or ask.artifact_id in allowed


def check_model_permitted(ask: RequestShape, limits: OrgLimits) -> Result[None, Refusal]:
    """A permission refusal when the organisation does not permit the asked model."""
    if model_permitted(limits, ask):
        return Success(None)
    return Failure(
        Refusal.of(
            ReasonCode.MODEL_NOT_PERMITTED,
            f"The organisation does not permit model {ask.model}"
            f" (artifact {ask.artifact_id}); an admin can add it.",
        )
    )


def check_limits(ask: RequestShape, limits: OrgLimits) -> Result[None, Refusal]:
    """Whether the request's shape fits the organisation's limits (context first, then size)."""
    if limits.max_context_tokens is not None and ask.context_tokens > limits.max_context_tokens:
        return Failure(
            Refusal.of(
                ReasonCode.CONTEXT_OVER_LIMIT,
                f"The request asks for a context of {ask.context_tokens} tokens"
                f" and the organisation's limit is {limits.max_context_tokens}.",
            )
        )
    if limits.max_model_bytes is not None and ask.model_bytes > limits.max_model_bytes:
        return Failure(
            Refusal.of(
                ReasonCode.MODEL_SIZE_OVER_LIMIT,
                f"Model {ask.model} is {ask.model_bytes} bytes"
                f" and the organisation's limit is {limits.max_model_bytes} bytes.",
            )
        )
    return Success(None)


def check_quota(ask: RequestShape, quota: OrgQuota, usage: QuotaUsage) -> Result[None, Refusal]:
    """Whether the request fits what is left of the quota (GPUs first, then workloads)."""
    if quota.max_gpus_held is not None and usage.gpus_held + ask.gpus > quota.max_gpus_held:
        return Failure(
            Refusal.of(
                ReasonCode.GPU_QUOTA_EXHAUSTED,
                f"The organisation holds {usage.gpus_held} of its {quota.max_gpus_held} GPUs"
                f" and this asks for {ask.gpus}; stopping a workload frees quota.",
            )
        )
    if quota.max_workloads is not None and usage.workloads + 1 > quota.max_workloads:
        return Failure(
            Refusal.of(
                ReasonCode.WORKLOAD_QUOTA_EXHAUSTED,
                f"The organisation runs {usage.workloads} of its {quota.max_workloads}"
                " workloads; stopping a workload frees quota.",
            )
        )
    return Success(None)


def check_request(
    role: Role, ask: RequestShape, limits: OrgLimits, quota: OrgQuota, usage: QuotaUsage
) -> Result[None, Refusal]:
    """Whether ``role`` may run ``ask``: permission, then limits, then quota; first "no" wins."""
    outcomes = (
        check_permission(role, Action.RUN),
        check_model_permitted(ask, limits),
        check_limits(ask, limits),
        check_quota(ask, quota, usage),
    )
    for outcome in outcomes:
        if isinstance(outcome, Failure):
            return outcome
    return Success(None)
