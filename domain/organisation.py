"""The organisation's policy: who may do what (roles), what the installation allows (limits)
and what one person or team may hold (quotas); and whose request this is.

Why it is so: docs/adr/decisions/domain.md (organisation.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from attrs import field, frozen
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
    check_quota,
    roles_that_may,
)
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind

GROUP_PREFIX = "group:"


@frozen(kw_only=True)
class Requester:
    """Who asked for something: a user name and the groups (teams) they belong to."""

    user: str
    groups: frozenset[str] = frozenset()

    def __attrs_post_init__(self) -> None:
        if not self.user.strip():
            raise ValueError("a requester has a user name")


@frozen(kw_only=True)
class Organisation:
    """The organisation's policy; ``Organisation.none()`` when nothing is configured."""

    configured: bool = True
    limits: OrgLimits = field(factory=OrgLimits.unbounded)
    # role -> user names and "group:NAME" entries that hold it
    roles: Mapping[Role, frozenset[str]] = field(factory=lambda: MappingProxyType({}))
    everyone: Role = Role.VIEWER
    user_quotas: Mapping[str, OrgQuota] = field(factory=lambda: MappingProxyType({}))
    team_quotas: Mapping[str, OrgQuota] = field(factory=lambda: MappingProxyType({}))
    contact: str | None = None  # where a refused person goes: a person, a channel, a page

    @classmethod
    def none(cls) -> Organisation:
        """No policy configured: everybody an admin, no limit, no quota."""
        return cls(configured=False, everyone=Role.ADMIN)


def role_of(org: Organisation, who: Requester) -> Role:
    """The most powerful role any entry naming ``who`` or one of their groups gives."""
    names = {who.user} | {GROUP_PREFIX + g for g in who.groups}
    held = [role for role, entries in org.roles.items() if names & entries]
    order = list(Role)
    return max([org.everyone, *held], key=order.index)


def _with_contact(sentence: str, org: Organisation) -> str:
    """``sentence``, sending the person to the policy's contact when it names one."""
    return f"{sentence.rstrip('.')}; ask {org.contact}." if org.contact else sentence


def check_action(org: Organisation, who: Requester, action: Action) -> Result[None, Refusal]:
    """A permission refusal when ``who`` may not take ``action`` under ``org``."""
    role = role_of(org, who)
    if action in PERMISSIONS[role]:
        return Success(None)
    may = roles_that_may(action)
    named = sorted({e for r in may for e in org.roles.get(r, frozenset())})
    whom = f" ({', '.join(named)})" if named else ""
    return Failure(
        Refusal.of(
            ReasonCode.ROLE_MAY_NOT,
            _with_contact(
                f"{who.user} has the {role.value} role, which may not {action.value}; only "
                f"{' and '.join(r.value + 's' for r in may)}{whom} can, by the organisation's "
                "policy",
                org,
            ),
        )
    )


@frozen(kw_only=True)
class Spending:
    """What one workload holds and whose budget it is counted against."""

    requester: Requester | None  # None: from before owners were recorded; counts for nobody
    gpus: int = 1


def usage_of(spending: Iterable[Spending], *, user: str | None, team: str | None) -> QuotaUsage:
    """What the workloads asked for by ``user`` (or by members of ``team``) hold."""
    mine = [
        s
        for s in spending
        if s.requester is not None
        and (s.requester.user == user if user is not None else team in s.requester.groups)
    ]
    return QuotaUsage(gpus_held=sum(s.gpus for s in mine), workloads=len(mine))


def _subject_refusal(refusal: Refusal, subject: str, org: Organisation) -> Refusal:
    """The quota refusal said of ``subject`` (a user or a team) rather than the organisation."""
    sentence = refusal.sentence.replace("The organisation", subject, 1)
    return Refusal.of(refusal.code, _with_contact(sentence, org))


def check_quotas(
    org: Organisation, who: Requester, ask: RequestShape, spending: Iterable[Spending]
) -> Result[None, Refusal]:
    """The person's own quota, then each of their teams' by name; the first exhausted wins."""
    spent = tuple(spending)
    subjects: list[tuple[str, OrgQuota, QuotaUsage]] = []
    if (own := org.user_quotas.get(who.user)) is not None:
        subjects.append((f"User {who.user}", own, usage_of(spent, user=who.user, team=None)))
    for team in sorted(who.groups & org.team_quotas.keys()):
        usage = usage_of(spent, user=None, team=team)
        subjects.append((f"Team {team}", org.team_quotas[team], usage))
    for subject, quota, usage in subjects:
        match check_quota(ask, quota, usage):
            case Failure(Refusal() as refusal):
                return Failure(_subject_refusal(refusal, subject, org))
    return Success(None)


def _limit_refusal(refusal: Refusal, org: Organisation) -> Refusal:
    return Refusal.of(refusal.code, _with_contact(refusal.sentence, org))


def check_shape(org: Organisation, ask: RequestShape) -> Result[None, Refusal]:
    """Whether the organisation permits the model and the request's shape fits its limits:
    what a workload that holds cards already must still meet to be moved or copied."""
    for outcome in (check_model_permitted(ask, org.limits), check_limits(ask, org.limits)):
        if isinstance(outcome, Failure):
            return Failure(_limit_refusal(outcome.failure(), org))
    return Success(None)


def _requester_known(org: Organisation, who: Requester | None, model: str) -> Result[None, Refusal]:
    """Under a configured policy a request must say who asked (on a fleet the API server
    checked the name); with no policy nobody need be named."""
    if who is not None or not org.configured:
        return Success(None)
    return Failure(
        Refusal.of(
            ReasonCode.REQUESTER_UNKNOWN,
            _with_contact(
                f"{model} was asked for without saying who asked, and the organisation's "
                "policy needs to know (nodeau run and nodeau batch submit say so; an object "
                "applied by hand needs spec.requester)",
                org,
            ),
        )
    )


def run_checks(
    org: Organisation, who: Requester | None, ask: RequestShape, spending: Iterable[Spending]
) -> tuple[tuple[RefusalKind, Result[None, Refusal]], ...]:
    """Each check a run meets, in order, with its outcome: permission (who asks and their
    role, then the model), limits, then quotas; from what the person can least change to
    what changes by itself (``domain.limits.check_request``'s order). ``who`` None: nobody
    was named, which only a policy that is not configured lets pass."""
    permitted = (
        _requester_known(org, who, ask.model) if who is None else check_action(org, who, Action.RUN)
    )
    quotas: Result[None, Refusal] = (
        Success(None) if who is None else check_quotas(org, who, ask, spending)
    )
    return (
        (RefusalKind.PERMISSION, permitted),
        (
            RefusalKind.PERMISSION,
            check_model_permitted(ask, org.limits).alt(lambda r: _limit_refusal(r, org)),
        ),
        (RefusalKind.LIMIT, check_limits(ask, org.limits).alt(lambda r: _limit_refusal(r, org))),
        (RefusalKind.QUOTA, quotas),
    )


def check_run(
    org: Organisation, who: Requester | None, ask: RequestShape, spending: Iterable[Spending]
) -> Result[None, Refusal]:
    """Whether ``who`` may run ``ask``: the first "no" of ``run_checks``, else yes."""
    for _kind, outcome in run_checks(org, who, ask, spending):
        if isinstance(outcome, Failure):
            return outcome
    return Success(None)


def roles_table(org: Organisation) -> Mapping[str, tuple[str, ...]]:
    """Each role's entries, least powerful first (for ``nodeau organisation``)."""
    return MappingProxyType(
        {role.value: tuple(sorted(org.roles.get(role, frozenset()))) for role in Role}
    )
