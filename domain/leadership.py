"""Leader election among the fleet's controllers: who may take the Lease, and who still leads.

Why it is so: docs/adr/decisions/domain.md (leadership.py).
"""

from __future__ import annotations

from datetime import datetime

from attrs import evolve, field, frozen

DEFAULT_DURATION_S = 12.0
DEFAULT_RENEW_DEADLINE_S = 7.0
DEFAULT_RETRY_PERIOD_S = 2.0
RETRY_ROOM = 1.2  # client-go's jitter factor: a renew deadline holds more than one retry


class TermsError(ValueError):
    """Lease terms that cannot elect safely; one line for a person."""


@frozen(kw_only=True)
class LeaseTerms:
    """How long a lease lasts, how long a holder may go without renewing, how often it tries."""

    duration_s: float = DEFAULT_DURATION_S
    renew_deadline_s: float = DEFAULT_RENEW_DEADLINE_S
    retry_period_s: float = DEFAULT_RETRY_PERIOD_S

    def __attrs_post_init__(self) -> None:
        check_terms(self)

    @property
    def stated_duration_s(self) -> int:
        """The duration as the Lease states it (whole seconds, rounded up)."""
        return -int(-self.duration_s // 1)


def check_terms(terms: LeaseTerms) -> None:
    """TermsError unless 0 < retry period x 1.2 < renew deadline < lease duration."""
    if terms.retry_period_s <= 0:
        raise TermsError(f"the retry period must be positive, got {terms.retry_period_s:g} s")
    if terms.renew_deadline_s <= RETRY_ROOM * terms.retry_period_s:
        raise TermsError(
            f"the renew deadline ({terms.renew_deadline_s:g} s) must be more than "
            f"{RETRY_ROOM:g} x the retry period ({terms.retry_period_s:g} s)"
        )
    if terms.duration_s <= terms.renew_deadline_s:
        raise TermsError(
            f"the lease duration ({terms.duration_s:g} s) must be more than the renew "
            f"deadline ({terms.renew_deadline_s:g} s)"
        )


def _non_negative(_instance: object, _attribute: object, value: int) -> None:
    if value < 0:
        raise ValueError(f"a lease's transitions cannot be negative, got {value}")


@frozen(kw_only=True)
class LeaseRecord:
    """What the Lease says: who holds it, for how long, since when, how often it changed hands."""

    holder: str | None  # None: no one (never taken, or released)
    duration_s: int | None  # leaseDurationSeconds as the holder stated it
    acquired_at: datetime | None = None
    renewed_at: datetime | None = None
    transitions: int = field(default=0, validator=_non_negative)


@frozen(kw_only=True)
class Observation:
    """The Lease as one candidate last saw it, and since when (its own monotonic clock) it has
    been unchanged."""

    record: LeaseRecord
    version: str  # the Lease's resourceVersion
    since: float


def observe(
    previous: Observation | None, record: LeaseRecord, version: str, now: float
) -> Observation:
    """What a candidate knows after reading the Lease at ``now``: a version it has seen
    before keeps the moment it was first seen; a new one is seen from ``now``."""
    if previous is not None and previous.version == version:
        return evolve(previous, record=record)
    return Observation(record=record, version=version, since=now)


def expires_at(observation: Observation, terms: LeaseTerms) -> float:
    """When, on the observer's clock, the holder it saw counts as gone if nothing changes
    (the holder's stated duration; our own when it stated none)."""
    stated = observation.record.duration_s
    duration = terms.duration_s if stated is None or stated <= 0 else float(stated)
    return observation.since + duration


def may_take(observation: Observation | None, identity: str, now: float, terms: LeaseTerms) -> bool:
    """Whether ``identity`` may write itself into the Lease as its holder at ``now``: there is
    no Lease yet, no one holds it, it holds it already (a renewal), or the holder has let
    it go unchanged for its whole duration."""
    if observation is None:
        return True
    holder = observation.record.holder
    if holder is None or holder == identity:
        return True
    return now >= expires_at(observation, terms)


def taken(
    current: LeaseRecord | None, identity: str, at: datetime, terms: LeaseTerms
) -> LeaseRecord:
    """The record ``identity`` writes to take or renew the Lease at wall-clock ``at``."""
    if current is not None and current.holder == identity:
        return evolve(current, duration_s=terms.stated_duration_s, renewed_at=at)
    transitions = 0 if current is None else current.transitions + 1
    return LeaseRecord(
        holder=identity,
        duration_s=terms.stated_duration_s,
        acquired_at=at,
        renewed_at=at,
        transitions=transitions,
    )


def released(current: LeaseRecord, at: datetime) -> LeaseRecord:
    """The record a holder writes to let the Lease go at ``at``: no holder, a 1 s duration."""
    return evolve(current, holder=None, duration_s=1, acquired_at=at, renewed_at=at)


def leads(renewed_at: float | None, now: float, terms: LeaseTerms) -> bool:
    """Whether a holder whose last successful take or renewal was sent at ``renewed_at`` (its
    monotonic clock; None: never, or it stepped down) still leads at ``now``."""
    return renewed_at is not None and renewed_at <= now < renewed_at + terms.renew_deadline_s


def lead_left(renewed_at: float | None, now: float, terms: LeaseTerms) -> float:
    """Seconds of leadership left at ``now`` (0 when it does not lead)."""
    if renewed_at is None or not leads(renewed_at, now, terms):
        return 0.0
    return renewed_at + terms.renew_deadline_s - now
