"""Entitlements: which plan's terms apply, given a parsed entitlement and a signature verdict.

An entitlement is a signed statement of what one installation may do. Checking
the signature (offline, against keys compiled into the binary) is an adapter's
job; it hands the domain the parsed ``Entitlement`` (if it could parse one) and
a ``SignatureVerdict``. ``effective_terms`` then decides, without a clock: the
time comes in as ``now``.

Only a valid signature, over an entitlement issued for this installation, at a
moment within ``[not_before, not_after)``, gives the entitlement's plan. Every
other case gives exactly the Home plan's terms, with the reason; protections
are never part of the answer because they are identical on every plan.

Checks run in this order, and the first that fails is the reason: the verdict
(a bad, unknown-key or malformed statement says nothing trustworthy, so nothing
in it is looked at), then the installation (it will never match later), then
the validity window (which may match later).
"""

from __future__ import annotations

import enum
from datetime import datetime

from attrs import field, frozen

from nodeau.domain.checks import aware, positive_or_none
from nodeau.domain.plans import (
    HOME,
    PLANS,
    Feature,
    PlanName,
    PlanTerms,
    Protection,
    plan_title,
    protections_for,
)


def is_aware(moment: datetime) -> bool:
    """Whether ``moment`` carries a time zone (naive times cannot be compared safely)."""
    return moment.tzinfo is not None and moment.utcoffset() is not None


class SignatureVerdict(str, enum.Enum):
    """What the adapter found when it checked the entitlement's signature."""

    VALID = "valid"
    BAD_SIGNATURE = "bad-signature"
    UNKNOWN_KEY = "unknown-key"
    MALFORMED = "malformed"


class EntitlementReason(str, enum.Enum):
    """Why these terms apply: accepted, or why the entitlement was not."""

    ACCEPTED = "accepted"
    NONE_PRESENT = "none-present"
    NOT_VERIFIED = "not-verified"
    BAD_SIGNATURE = "bad-signature"
    UNKNOWN_KEY = "unknown-key"
    MALFORMED = "malformed"
    OTHER_INSTALLATION = "other-installation"
    NOT_YET_VALID = "not-yet-valid"
    EXPIRED = "expired"


@frozen(kw_only=True)
class Entitlement:
    """A parsed signed statement: this installation gets this plan, plus extras, for a while.

    ``max_machines``/``max_gpus``, when given, replace the plan's bound. The
    window ``[not_before, not_after)`` is not checked here: an empty one is
    simply never valid.
    """

    installation_id: str
    plan: PlanName
    features_added: frozenset[Feature] = frozenset()
    max_machines: int | None = field(default=None, validator=positive_or_none)
    max_gpus: int | None = field(default=None, validator=positive_or_none)
    not_before: datetime = field(validator=aware)
    not_after: datetime = field(validator=aware)
    issuer_key_id: str

    def __attrs_post_init__(self) -> None:
        if not self.installation_id.strip():
            raise ValueError("an entitlement names the installation it was issued for")

    def terms(self) -> PlanTerms:
        """The plan's standard terms with this entitlement's extras and overrides applied."""
        base = PLANS[self.plan]
        return PlanTerms(
            name=self.plan,
            features=base.features | self.features_added,
            max_machines=base.max_machines if self.max_machines is None else self.max_machines,
            max_gpus=base.max_gpus if self.max_gpus is None else self.max_gpus,
        )


@frozen(kw_only=True)
class EntitlementStatus:
    """The terms in force, whether an entitlement was accepted, why, and a sentence for output."""

    terms: PlanTerms
    reason: EntitlementReason
    sentence: str

    def __attrs_post_init__(self) -> None:
        if not self.accepted and self.terms != HOME:
            raise ValueError("an entitlement that was not accepted means the Home plan")

    @property
    def accepted(self) -> bool:
        """Whether the entitlement was accepted (its plan is in force)."""
        return self.reason is EntitlementReason.ACCEPTED

    @property
    def protections(self) -> frozenset[Protection]:
        """The protections in force: all of them, whatever the outcome."""
        return protections_for(self.terms.name)

    @classmethod
    def home(cls, reason: EntitlementReason, why: str) -> EntitlementStatus:
        """The Home plan, because of ``reason``; ``why`` is the first half of the sentence."""
        if reason is EntitlementReason.ACCEPTED:
            raise ValueError("the Home fallback needs a reason other than accepted")
        return cls(terms=HOME, reason=reason, sentence=f"{why}; running on the free Home plan.")

    @classmethod
    def accepting(cls, entitlement: Entitlement) -> EntitlementStatus:
        """The entitlement's terms are in force."""
        return cls(
            terms=entitlement.terms(),
            reason=EntitlementReason.ACCEPTED,
            sentence=f"Running on the {plan_title(entitlement.plan)} plan,"
            f" entitled until {entitlement.not_after.isoformat()}.",
        )


def verdict_refusal(
    verdict: SignatureVerdict, entitlement: Entitlement | None
) -> tuple[EntitlementReason, str] | None:
    """The reason and the sentence's first half for a verdict that is not valid, else ``None``."""
    if verdict is SignatureVerdict.BAD_SIGNATURE:
        return EntitlementReason.BAD_SIGNATURE, "The entitlement's signature does not verify"
    if verdict is SignatureVerdict.UNKNOWN_KEY:
        key = "a key" if entitlement is None else f"key {entitlement.issuer_key_id},"
        return (
            EntitlementReason.UNKNOWN_KEY,
            f"The entitlement is signed by {key} which this build does not know",
        )
    if verdict is SignatureVerdict.MALFORMED:
        return EntitlementReason.MALFORMED, "The entitlement could not be read"
    return None


def in_window(entitlement: Entitlement, now: datetime) -> bool:
    """Whether ``now`` lies in ``[not_before, not_after)``."""
    return entitlement.not_before <= now < entitlement.not_after


def effective_terms(
    entitlement: Entitlement | None,
    verdict: SignatureVerdict | None,
    installation_id: str,
    now: datetime,
) -> EntitlementStatus:
    """The terms in force now: the entitlement's if it can be accepted, else the Home plan's.

    ``verdict`` is ``None`` when nothing was checked. A valid verdict with no
    entitlement is a programming error (``ValueError``), as is a naive ``now``.
    """
    if not is_aware(now):
        raise ValueError("now must carry a time zone")
    refused = None if verdict is None else verdict_refusal(verdict, entitlement)
    if refused is not None:
        return EntitlementStatus.home(*refused)
    if entitlement is None:
        if verdict is SignatureVerdict.VALID:
            raise ValueError("a valid verdict needs the entitlement it verified")
        return EntitlementStatus.home(EntitlementReason.NONE_PRESENT, "No entitlement is installed")
    if verdict is None:
        return EntitlementStatus.home(
            EntitlementReason.NOT_VERIFIED, "The entitlement's signature has not been checked"
        )
    title = plan_title(entitlement.plan)
    if entitlement.installation_id != installation_id:
        return EntitlementStatus.home(
            EntitlementReason.OTHER_INSTALLATION,
            f"The {title} entitlement was issued for installation {entitlement.installation_id},"
            f" not this one ({installation_id})",
        )
    if now < entitlement.not_before:
        return EntitlementStatus.home(
            EntitlementReason.NOT_YET_VALID,
            f"The {title} entitlement is not valid until {entitlement.not_before.isoformat()}",
        )
    if not in_window(entitlement, now):
        return EntitlementStatus.home(
            EntitlementReason.EXPIRED,
            f"The {title} entitlement expired at {entitlement.not_after.isoformat()}",
        )
    return EntitlementStatus.accepting(entitlement)
