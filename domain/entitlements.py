"""Entitlements: which plan's terms apply, given a parsed entitlement and a signature verdict.

Why it is so: docs/adr/decisions/domain.md (entitlements.py).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

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
    CLOCK_MOVED_BACK = "clock-moved-back"


@frozen(kw_only=True)
class Timing:
    """How time bends the answer: the grace after expiry, the warning ahead of it, and how
    far behind the anchor the clock may read before it counts as moved back."""

    grace: timedelta = timedelta(days=14)
    warn_ahead: timedelta = timedelta(days=30)
    clock_tolerance: timedelta = timedelta(hours=24)

    def __attrs_post_init__(self) -> None:
        if min(self.grace, self.warn_ahead, self.clock_tolerance) < timedelta(0):
            raise ValueError("grace, warning and clock tolerance cannot be negative")


TIMING = Timing()
HOME_TAIL = "; running on the free Home plan."


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
    issued_at: datetime | None = field(default=None, validator=aware)

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
    warning: str | None = None  # accepted, but expiring soon or in its grace

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

    @property
    def cause(self) -> str:
        """Why an entitlement was not accepted, without what follows from it (the sentence's
        first half); the whole sentence when it was accepted."""
        return self.sentence.removesuffix(HOME_TAIL)

    @classmethod
    def home(cls, reason: EntitlementReason, why: str) -> EntitlementStatus:
        """The Home plan, because of ``reason``; ``why`` is the first half of the sentence."""
        if reason is EntitlementReason.ACCEPTED:
            raise ValueError("the Home fallback needs a reason other than accepted")
        return cls(terms=HOME, reason=reason, sentence=f"{why}{HOME_TAIL}")

    @classmethod
    def accepting(cls, entitlement: Entitlement, warning: str | None = None) -> EntitlementStatus:
        """The entitlement's terms are in force."""
        return cls(
            terms=entitlement.terms(),
            reason=EntitlementReason.ACCEPTED,
            sentence=f"Running on the {plan_title(entitlement.plan)} plan,"
            f" entitled until {entitlement.not_after.isoformat()}.",
            warning=warning,
        )


@frozen(kw_only=True)
class Verification:
    """What the adapter found in a document: its verdict, the key it names, the entitlement
    it carries (only when the signature is valid) and, when it is refused, what was wrong."""

    verdict: SignatureVerdict
    key_id: str | None = None
    entitlement: Entitlement | None = None
    detail: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.verdict is SignatureVerdict.VALID) != (self.entitlement is not None):
            raise ValueError("an entitlement is carried exactly when its signature is valid")


def verdict_refusal(
    verdict: SignatureVerdict, entitlement: Entitlement | None, key_id: str | None = None
) -> tuple[EntitlementReason, str] | None:
    """The reason and the sentence's first half for a verdict that is not valid, else ``None``.

    ``key_id``: the key the document names, when no entitlement could be trusted to say it.
    """
    if verdict is SignatureVerdict.BAD_SIGNATURE:
        return EntitlementReason.BAD_SIGNATURE, "The entitlement's signature does not verify"
    if verdict is SignatureVerdict.UNKNOWN_KEY:
        named = key_id if entitlement is None else entitlement.issuer_key_id
        key = "a key" if named is None else f"key {named},"
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


def span_words(span: timedelta) -> str:
    """A duration as a person reads it: ``14 days``, ``24 hours``, ``90 minutes``; days
    from two of them, so a day reads ``24 hours``."""
    seconds = int(span.total_seconds())
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= (2 * size if unit == "day" else size) and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def newest_seen(anchor: datetime | None, now: datetime) -> datetime:
    """The anchor after seeing ``now``: it only moves forward."""
    return now if anchor is None or now > anchor else anchor


def clock_anchor(stored: datetime | None, entitlement: Entitlement | None) -> datetime | None:
    """The moment the clock must not fall behind: the newest stored moment, or when the
    entitlement was issued, whichever is later."""
    issued = None if entitlement is None else entitlement.issued_at
    moments = [m for m in (stored, issued) if m is not None]
    return max(moments) if moments else None


def clock_moved_back(now: datetime, anchor: datetime | None, tolerance: timedelta) -> bool:
    """Whether ``now`` is earlier than ``anchor`` by more than ``tolerance``."""
    return anchor is not None and now < anchor - tolerance


def grace_end(entitlement: Entitlement, timing: Timing = TIMING) -> datetime:
    """When new decisions stop using the entitlement's terms: its expiry plus the grace, or
    the last moment a date can name when that sum is beyond it (an expiry of 9999-12-31)."""
    last = datetime.max.replace(tzinfo=entitlement.not_after.tzinfo)
    if entitlement.not_after > last - timing.grace:
        return last
    return entitlement.not_after + timing.grace


def expiry_warning(entitlement: Entitlement, now: datetime, timing: Timing) -> str | None:
    """A warning while ``now`` is within ``warn_ahead`` of expiry or inside the grace."""
    title = plan_title(entitlement.plan)
    expiry = entitlement.not_after.isoformat()
    then = (
        f"new decisions keep its terms until {grace_end(entitlement, timing).isoformat()}"
        f" ({span_words(timing.grace)} of grace), then use the free Home plan;"
        " nothing already serving is stopped."
    )
    if now >= entitlement.not_after:
        return f"The {title} entitlement expired at {expiry}: {then}"
    if now >= entitlement.not_after - timing.warn_ahead:
        return f"The {title} entitlement expires at {expiry}: {then}"
    return None


def effective_terms(
    entitlement: Entitlement | None,
    verdict: SignatureVerdict | None,
    installation_id: str,
    now: datetime,
    *,
    anchor: datetime | None = None,
    timing: Timing = TIMING,
    key_id: str | None = None,
) -> EntitlementStatus:
    """The terms in force now: the entitlement's if it can be accepted, else the Home plan's.

    ``verdict`` is ``None`` when nothing was checked. ``anchor`` is the newest moment
    this installation has seen (None: none recorded yet); ``key_id`` the key the
    document names. A valid verdict with no entitlement is a programming error
    (``ValueError``), as is a naive ``now``.
    """
    if not is_aware(now):
        raise ValueError("now must carry a time zone")
    refused = None if verdict is None else verdict_refusal(verdict, entitlement, key_id)
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
    seen = clock_anchor(anchor, entitlement)
    if seen is not None and clock_moved_back(now, seen, timing.clock_tolerance):
        return EntitlementStatus.home(
            EntitlementReason.CLOCK_MOVED_BACK,
            f"The clock reads {now.isoformat()}, more than {span_words(timing.clock_tolerance)}"
            f" before {seen.isoformat()}, a moment this installation has already seen:"
            f" the clock was moved back, so the {title} entitlement's dates cannot be checked",
        )
    if now < entitlement.not_before:
        return EntitlementStatus.home(
            EntitlementReason.NOT_YET_VALID,
            f"The {title} entitlement is not valid until {entitlement.not_before.isoformat()}",
        )
    if now >= grace_end(entitlement, timing):
        return EntitlementStatus.home(
            EntitlementReason.EXPIRED,
            f"The {title} entitlement expired at {entitlement.not_after.isoformat()}"
            f" and its {span_words(timing.grace)} of grace ended at"
            f" {grace_end(entitlement, timing).isoformat()}",
        )
    return EntitlementStatus.accepting(entitlement, expiry_warning(entitlement, now, timing))


def verified_terms(
    verification: Verification | None,
    installation_id: str,
    now: datetime,
    *,
    anchor: datetime | None = None,
    timing: Timing = TIMING,
) -> EntitlementStatus:
    """``effective_terms`` of what the adapter found (``None``: no document installed)."""
    if verification is None:
        return effective_terms(None, None, installation_id, now, anchor=anchor, timing=timing)
    return effective_terms(
        verification.entitlement,
        verification.verdict,
        installation_id,
        now,
        anchor=anchor,
        timing=timing,
        key_id=verification.key_id,
    )
