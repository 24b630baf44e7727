"""``nodeau organisation`` and ``nodeau plan explain``: the organisation's policy, on either plane.

Why it is so: docs/adr/decisions/apps-planes.md (organisation/policy.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attrs import frozen
from returns.result import Failure

from nodeau.apps.organisation.commands import OrganisationView, QuotaView
from nodeau.domain.limits import Action, QuotaUsage, Role
from nodeau.domain.organisation import (
    Organisation,
    Requester,
    Spending,
    check_action,
    role_of,
    roles_table,
    usage_of,
)
from nodeau.domain.plans import Feature, PlanTerms, plan_has
from nodeau.domain.refusals import Refusal
from nodeau.ports.organisation import NotAllowed, OrganisationPolicy


def permit(org: Organisation, who: Requester, action: Action) -> None:
    """Nothing when ``who`` may take ``action``; ``NotAllowed`` (permission) otherwise."""
    match check_action(org, who, action):
        case Failure(Refusal() as refusal):
            raise NotAllowed(refusal)


def organisation_view(
    plane: str, policy: OrganisationPolicy, who: Requester, spent: Iterable[Spending]
) -> OrganisationView:
    """What ``nodeau organisation`` shows: the policy, who asks, and each quota's spending."""
    org = policy.read()
    spending = tuple(spent)
    limits = org.limits
    quotas = [
        QuotaView(
            subject=f"user {name}",
            max_gpus_held=q.max_gpus_held,
            max_workloads=q.max_workloads,
            **_spent(usage_of(spending, user=name, team=None)),
        )
        for name, q in sorted(org.user_quotas.items())
    ] + [
        QuotaView(
            subject=f"team {name}",
            max_gpus_held=q.max_gpus_held,
            max_workloads=q.max_workloads,
            **_spent(usage_of(spending, user=None, team=name)),
        )
        for name, q in sorted(org.team_quotas.items())
    ]
    return OrganisationView(
        plane=plane,
        where=policy.where,
        configured=org.configured,
        user=who.user,
        groups=tuple(sorted(who.groups)),
        role=role_of(org, who).value,
        roles=dict(roles_table(org)),
        everyone=org.everyone.value,
        max_context_tokens=limits.max_context_tokens,
        max_model_bytes=limits.max_model_bytes,
        allowed_models=None
        if limits.allowed_models is None
        else tuple(sorted(limits.allowed_models)),
        allowed_machines=(
            None if limits.allowed_machines is None else tuple(sorted(limits.allowed_machines))
        ),
        quotas=tuple(quotas),
        contact=org.contact,
    )


def _spent(usage: QuotaUsage) -> dict[str, int]:
    return {"gpus_held": usage.gpus_held, "workloads": usage.workloads}


def install_organisation(
    policy: OrganisationPolicy, who: Requester, plan: PlanTerms, document: bytes, source: str
) -> str:
    """Keep ``document`` as the policy: ``who`` must be an admin now, and the plan must
    include organisation limits; a document that does not read replaces nothing."""
    permit(policy.read(), who, Action.SET_ORGANISATION)
    match plan_has(plan, Feature.ORGANISATION_LIMITS):
        case Failure(Refusal() as refusal):
            raise NotAllowed(refusal)
    org = policy.install(document)
    mine = role_of(org, who)
    after = (
        ""
        if mine is Role.ADMIN
        else f"; note: under it you ({who.user}) are {mine.value}, and only an admin can "
        "change it again"
    )
    return f"Installed the organisation's policy from {source}, kept in {policy.where}{after}."


def remove_organisation(policy: OrganisationPolicy, who: Requester) -> str:
    """Remove the policy (an admin's action): everybody is an admin again, nothing limited."""
    permit(policy.read(), who, Action.SET_ORGANISATION)
    if not policy.remove():
        return f"No organisation policy is installed ({policy.where}); nothing was removed."
    return (
        f"Removed the organisation's policy from {policy.where}: no roles, limits or quotas "
        "apply to new requests; nothing running was stopped."
    )


@frozen(kw_only=True)
class Organisations:
    """``OrganisationCommands`` on either plane: each gives its policy, who asks (a plane
    that cannot say raises), the plan's terms and what is held now."""

    _plane: str
    _policy: Callable[[], OrganisationPolicy]
    _requester: Callable[[], Requester]
    _terms: Callable[[], PlanTerms]
    _spent: Callable[[], Iterable[Spending]]

    def view(self) -> OrganisationView:
        who = self._requester()
        return organisation_view(self._plane, self._policy(), who, self._spent())

    def install(self, document: bytes, source: str) -> str:
        who = self._requester()
        terms = self._terms()
        return install_organisation(self._policy(), who, terms, document, source)

    def remove(self) -> str:
        who = self._requester()
        return remove_organisation(self._policy(), who)
