"""Plans: what each plan adds, how large a fleet it covers, and what it never withholds.

Why it is so: docs/adr/decisions/domain.md (plans.py).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType

from attrs import field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.checks import positive_or_none
from nodeau.domain.refusals import ReasonCode, Refusal


class PlanName(str, enum.Enum):
    """The plans, cheapest first."""

    HOME = "home"
    PRO = "pro"
    TEAM = "team"
    ENTERPRISE = "enterprise"


class Feature(str, enum.Enum):
    """What a plan adds on top of running models on your own hardware."""

    AUTOMATIC_RECOVERY = "automatic-recovery"  # restart a failed workload without a person
    ORGANISATION_LIMITS = "organisation-limits"  # configurable org limits, quotas and roles
    CLOUD_FLEET_VIEW = "cloud-fleet-view"  # see and operate the fleet from app.nodeau.ai
    SSO = "sso"  # sign in to Nodeau Cloud through the organisation's identity provider
    AUDIT_EXPORT = "audit-export"  # export the record of decisions and actions


class Protection(str, enum.Enum):
    """What protects users; identical on every plan, never a feature."""

    ADMISSION = "admission"
    ARTIFACT_VERIFICATION = "artifact-verification"
    AUTHENTICATION = "authentication"
    INTEGRITY_CHECKS = "integrity-checks"


PROTECTIONS: frozenset[Protection] = frozenset(Protection)

PLAN_ORDER: tuple[PlanName, ...] = tuple(PlanName)


@frozen(kw_only=True)
class PlanTerms:
    """What one plan gives: its features and fleet bounds (``None`` = unbounded)."""

    name: PlanName
    features: frozenset[Feature] = frozenset()
    max_machines: int | None = field(default=None, validator=positive_or_none)
    max_gpus: int | None = field(default=None, validator=positive_or_none)


# automatic recovery is on every plan: the recovery document offers it to every fleet and
# says only that the plan's bounds apply to where a workload may go (ADR 0014)
HOME = PlanTerms(
    name=PlanName.HOME,
    features=frozenset({Feature.AUTOMATIC_RECOVERY}),
    max_machines=2,
    max_gpus=8,
)
PRO = PlanTerms(
    name=PlanName.PRO,
    features=frozenset({Feature.AUTOMATIC_RECOVERY, Feature.CLOUD_FLEET_VIEW}),
    max_machines=8,
    max_gpus=64,
)
TEAM = PlanTerms(
    name=PlanName.TEAM,
    features=PRO.features | {Feature.ORGANISATION_LIMITS, Feature.AUDIT_EXPORT},
    max_machines=64,
    max_gpus=512,
)
ENTERPRISE = PlanTerms(name=PlanName.ENTERPRISE, features=frozenset(Feature))

PLANS: Mapping[PlanName, PlanTerms] = MappingProxyType(
    {terms.name: terms for terms in (HOME, PRO, TEAM, ENTERPRISE)}
)


def protections_for(plan: PlanName) -> frozenset[Protection]:
    """Every protection, whatever the plan: nothing that protects you is withheld."""
    del plan  # deliberately unused: the answer must not depend on it
    return PROTECTIONS


def plan_title(plan: PlanName) -> str:
    """The plan's name as a person reads it: ``Home``, ``Pro``, ``Team``, ``Enterprise``."""
    return plan.value.capitalize()


def within(bound: int | None, value: int) -> bool:
    """Whether ``value`` fits under ``bound``; ``None`` bounds nothing."""
    return bound is None or value <= bound


def bound_covers(bigger: int | None, smaller: int | None) -> bool:
    """Whether the bound ``bigger`` admits everything ``smaller`` admits (``None`` = unbounded)."""
    return bigger is None or (smaller is not None and smaller <= bigger)


def plan_covers(bigger: PlanTerms, smaller: PlanTerms) -> bool:
    """Whether ``bigger`` gives at least every feature and bound ``smaller`` gives."""
    return (
        bigger.features >= smaller.features
        and bound_covers(bigger.max_machines, smaller.max_machines)
        and bound_covers(bigger.max_gpus, smaller.max_gpus)
    )


def cheapest_plan_with(feature: Feature) -> PlanName:
    """The first plan, cheapest first, whose standard terms include ``feature``."""
    return next(name for name in PLAN_ORDER if feature in PLANS[name].features)


def plan_allows_fleet_size(terms: PlanTerms, machines: int, gpus: int) -> Result[None, Refusal]:
    """Whether a fleet of ``machines`` machines holding ``gpus`` GPUs fits the plan.

    Machines are checked before GPUs: adding a machine is the step a person takes.
    """
    if machines < 0 or gpus < 0:
        raise ValueError(f"a fleet cannot have {machines} machines or {gpus} GPUs")
    title = plan_title(terms.name)
    if not within(terms.max_machines, machines):
        return Failure(
            Refusal.of(
                ReasonCode.MACHINES_OVER_PLAN,
                f"The {title} plan covers {terms.max_machines} machines"
                f" and this fleet would have {machines}.",
            )
        )
    if not within(terms.max_gpus, gpus):
        return Failure(
            Refusal.of(
                ReasonCode.GPUS_OVER_PLAN,
                f"The {title} plan covers {terms.max_gpus} GPUs and this fleet would have {gpus}.",
            )
        )
    return Success(None)


@frozen(kw_only=True)
class PlanScope:
    """The cards a plan's bounds cover in a fleet, and the machines it leaves out, with why.

    Machines are counted by what they do now (``coverage_order``): those holding work
    first, then those that report and take new work, then the rest, name order breaking
    ties; each machine's cards in the order it reports them. A machine is covered while
    the machines before it leave room under ``max_machines``, and a card while the cards
    before it leave room under ``max_gpus``. So a fleet larger than its plan keeps working
    on the part the plan covers, nothing running is touched, and when a covered machine
    stops answering its slot goes to one that reports, where its work can recover.
    """

    covered_gpus: frozenset[str]
    left_out: tuple[tuple[str, str], ...]  # (machine, why) for machines with no covered card
    gpus_left_out: int  # cards of covered machines beyond ``max_gpus``


def coverage_order(
    machines: Iterable[str],
    *,
    holding: Collection[str] = (),
    taking_work: Collection[str] | None = None,
) -> tuple[str, ...]:
    """The order a plan's bounds count ``machines`` in: machines holding work first, then
    machines in ``taking_work`` (they report and are candidates for new work; ``None``:
    every machine), then the rest; name order only breaks ties.

    A machine that holds nothing and stopped answering so comes after one that reports,
    and its slot under ``max_machines`` goes to a machine work can move to.
    """
    held = frozenset(holding)
    open_ = None if taking_work is None else frozenset(taking_work)
    return tuple(
        sorted(
            set(machines),
            key=lambda m: (m not in held, open_ is not None and m not in open_, m),
        )
    )


def plan_scope(
    terms: PlanTerms,
    machines: Iterable[tuple[str, tuple[str, ...]]],
    *,
    holding: Collection[str] = (),
    taking_work: Collection[str] | None = None,
) -> PlanScope:
    """What ``terms`` cover of ``machines`` (each its name and its cards' UUIDs), counted
    in ``coverage_order``: ``holding`` the machines with a reservation, ``taking_work`` the
    machines that report and take new work (``None``: every machine)."""
    title = plan_title(terms.name)
    covered: set[str] = set()
    left_out: list[tuple[str, str]] = []
    beyond = 0
    cards = dict(machines)
    order = coverage_order(cards, holding=holding, taking_work=taking_work)
    for count, (machine, gpus) in enumerate(((m, cards[m]) for m in order), start=1):
        if not within(terms.max_machines, count):
            left_out.append((machine, f"beyond the {title} plan's {terms.max_machines} machines"))
            continue
        room = len(gpus) if terms.max_gpus is None else max(terms.max_gpus - len(covered), 0)
        if room == 0 and gpus:
            left_out.append((machine, f"beyond the {title} plan's {terms.max_gpus} GPUs"))
            continue
        covered.update(gpus[:room])
        beyond += max(len(gpus) - room, 0)
    return PlanScope(
        covered_gpus=frozenset(covered), left_out=tuple(left_out), gpus_left_out=beyond
    )


def plan_has(terms: PlanTerms, feature: Feature) -> Result[None, Refusal]:
    """Whether the plan includes ``feature``; the refusal names the cheapest plan that does."""
    if feature in terms.features:
        return Success(None)
    return Failure(
        Refusal.of(
            ReasonCode.FEATURE_NOT_IN_PLAN,
            f"The {plan_title(terms.name)} plan does not include {feature.value};"
            f" the {plan_title(cheapest_plan_with(feature))} plan does.",
        )
    )
