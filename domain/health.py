"""Machine health: what two timestamped signals say about one machine.

Why it is so: docs/adr/decisions/domain.md (health.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from attrs import Attribute, field, frozen


class Health(str, enum.Enum):
    """What Nodeau believes about a machine, as ``nodeau fleet list`` shows it."""

    REPORTING = "reporting"
    DEGRADED = "degraded"
    UNREACHABLE = "unreachable"
    UPGRADING = "upgrading"


class Signal(str, enum.Enum):
    """The two signals a machine gives."""

    NODE_HEARTBEAT = "node-heartbeat"
    AGENT_REPORT = "agent-report"


SIGNAL_NAMES = {
    Signal.NODE_HEARTBEAT: "its Kubernetes agent",
    Signal.AGENT_REPORT: "Nodeau's agent",
}

# How bad a state is, for "a fresher signal never makes it worse".
SEVERITY = {Health.REPORTING: 0, Health.DEGRADED: 1, Health.UNREACHABLE: 2}


def require_aware(at: datetime | None, what: str) -> None:
    """Refuse a naive datetime: a naive time would need the local zone to print."""
    if at is not None and at.utcoffset() is None:
        raise ValueError(f"{what} must carry a timezone, got {at.isoformat()}")


def clock_time(at: datetime) -> str:
    """A moment as ``HH:MM:SS`` in UTC, the way ``nodeau ps`` prints it."""
    require_aware(at, "a printed time")
    return at.astimezone(UTC).strftime("%H:%M:%S")


@frozen(kw_only=True)
class Signals:
    """When each signal was last seen (``None``: never), and the upgrade mark."""

    node_heartbeat_at: datetime | None
    agent_report_at: datetime | None
    upgrading: bool = False
    expects_node_heartbeat: bool = True

    def __attrs_post_init__(self) -> None:
        require_aware(self.node_heartbeat_at, "node_heartbeat_at")
        require_aware(self.agent_report_at, "agent_report_at")
        if not self.expects_node_heartbeat and self.node_heartbeat_at is not None:
            raise ValueError("a machine without a Kubernetes node has no node heartbeat")

    @classmethod
    def one_machine(cls, *, agent_report_at: datetime | None, upgrading: bool = False) -> Signals:
        """Signals on the one-machine plane, where only Nodeau's agent reports."""
        return cls(
            node_heartbeat_at=None,
            agent_report_at=agent_report_at,
            upgrading=upgrading,
            expects_node_heartbeat=False,
        )


def _positive_grace(_instance: object, attribute: Attribute[timedelta], value: timedelta) -> None:
    if value <= timedelta(0):
        raise ValueError(f"{attribute.name} must be positive, got {value}")


@frozen(kw_only=True)
class HealthPolicy:
    """How long each signal may stay silent before it counts as quiet.

    ``node_grace`` defaults to 40 s, kubelet's node-monitor grace period, so a
    node Kubernetes still calls Ready is never called quiet here. The agent
    reports more often, so ``agent_grace`` defaults to 30 s.
    """

    node_grace: timedelta = field(default=timedelta(seconds=40), validator=_positive_grace)
    agent_grace: timedelta = field(default=timedelta(seconds=30), validator=_positive_grace)


@frozen(kw_only=True)
class MachineHealth:
    """One assessment: the state, since when, which signals are quiet, the sentence."""

    state: Health
    since: datetime | None
    quiet: frozenset[Signal]
    sentence: str

    def __attrs_post_init__(self) -> None:
        health_invariants(self.state, self.since, self.quiet)


def health_invariants(state: Health, since: datetime | None, quiet: frozenset[Signal]) -> None:
    """Raise ValueError for a combination no assessment can produce."""
    require_aware(since, "since")
    if state is Health.REPORTING and (quiet or since is not None):
        raise ValueError("a reporting machine has no quiet signal and no since")
    if state is Health.DEGRADED and len(quiet) != 1:
        raise ValueError("a degraded machine has exactly one quiet signal")
    if state is Health.UNREACHABLE and (not quiet or since is None):
        raise ValueError("an unreachable machine has quiet signals and a recorded since")
    if state is Health.UPGRADING and since is None:
        raise ValueError("an upgrading machine records since when it carries the mark")


def is_quiet(last_seen: datetime | None, now: datetime, grace: timedelta) -> bool:
    """A signal is quiet when never seen, or when its age has reached its grace."""
    return last_seen is None or now - last_seen >= grace


def quiet_since(last_seen: datetime | None, grace: timedelta) -> datetime | None:
    """The moment a seen signal went (or goes) quiet; ``None`` when never seen."""
    return None if last_seen is None else last_seen + grace


Sighting = tuple[datetime | None, timedelta]


def _timed(signals: Signals, policy: HealthPolicy) -> dict[Signal, Sighting]:
    """The signals that count on this plane, each with its last sighting and grace."""
    timed: dict[Signal, Sighting] = {
        Signal.AGENT_REPORT: (signals.agent_report_at, policy.agent_grace)
    }
    if signals.expects_node_heartbeat:
        timed[Signal.NODE_HEARTBEAT] = (signals.node_heartbeat_at, policy.node_grace)
    return timed


def quiet_signals(signals: Signals, now: datetime, policy: HealthPolicy) -> frozenset[Signal]:
    """Which of the signals that count on this plane are quiet at ``now``."""
    return frozenset(
        s for s, (seen, grace) in _timed(signals, policy).items() if is_quiet(seen, now, grace)
    )


def recorded_since(previous: MachineHealth | None, state: Health, now: datetime) -> datetime | None:
    """The moment ``previous`` recorded for ``state``, if it is in that state and not after now."""
    if previous is None or previous.state is not state or previous.since is None:
        return None
    return previous.since if previous.since <= now else None


def unreachable_since(
    signals: Signals,
    now: datetime,
    policy: HealthPolicy,
    previous: MachineHealth | None,
    watching_since: datetime | None = None,
) -> datetime:
    """The recorded moment both signals became quiet (see the module's decisions)."""
    moments = [seen + grace for seen, grace in _timed(signals, policy).values() if seen is not None]
    kept = recorded_since(previous, Health.UNREACHABLE, now)
    if kept is not None and all(moment <= kept for moment in moments):
        return kept
    if kept is None and previous is not None and previous.state is Health.UPGRADING:
        return now
    since = max(moments) if moments else now
    return since if watching_since is None else min(now, max(since, watching_since))


def upgrading_since(now: datetime, previous: MachineHealth | None) -> datetime:
    """When the upgrade mark was first seen: kept from ``previous``, else ``now``."""
    kept = recorded_since(previous, Health.UPGRADING, now)
    return now if kept is None else kept


def _degraded(signal: Signal, since: datetime | None) -> MachineHealth:
    name = SIGNAL_NAMES[signal]
    what = "has never reported" if since is None else f"is quiet since {clock_time(since)}"
    return MachineHealth(
        state=Health.DEGRADED,
        since=since,
        quiet=frozenset({signal}),
        sentence=f"degraded: {name} {what}; nothing moves",
    )


def assess(
    signals: Signals,
    now: datetime,
    policy: HealthPolicy | None = None,
    previous: MachineHealth | None = None,
    watching_since: datetime | None = None,
) -> MachineHealth:
    """Decide a machine's health at ``now`` from its signals and the last assessment.

    ``watching_since``: when the assessor (the controller) started watching again after
    a stall; quiet time before it is not counted against a machine newly found unreachable.
    """
    require_aware(now, "now")
    require_aware(watching_since, "watching_since")
    policy = policy if policy is not None else HealthPolicy()
    quiet = quiet_signals(signals, now, policy)
    timed = _timed(signals, policy)
    if signals.upgrading:
        return MachineHealth(
            state=Health.UPGRADING,
            since=upgrading_since(now, previous),
            quiet=quiet,
            sentence="upgrading: a fleet upgrade is restarting it; nothing moves",
        )
    if quiet == frozenset(timed):
        since = unreachable_since(signals, now, policy, previous, watching_since)
        why = "both signals quiet" if len(timed) == 2 else "Nodeau's agent is quiet"
        return MachineHealth(
            state=Health.UNREACHABLE,
            since=since,
            quiet=quiet,
            sentence=f"unreachable since {clock_time(since)}: {why}",
        )
    if quiet:
        (signal,) = quiet
        return _degraded(signal, quiet_since(*timed[signal]))
    fresh = "both signals fresh" if len(timed) == 2 else "Nodeau's agent is fresh"
    return MachineHealth(
        state=Health.REPORTING, since=None, quiet=frozenset(), sentence=f"reporting: {fresh}"
    )


def unreachable_for(health: MachineHealth, now: datetime) -> timedelta:
    """How long the machine has been unreachable at ``now``; zero unless it is."""
    if health.state is not Health.UNREACHABLE or health.since is None:
        return timedelta(0)
    return max(timedelta(0), now - health.since)


def next_quiet(
    signals: Signals, now: datetime, policy: HealthPolicy | None = None
) -> datetime | None:
    """The next moment after ``now`` one of the machine's fresh signals goes quiet if it is
    not renewed before: when an assessment could next find the machine changed. None when
    every signal is quiet already."""
    require_aware(now, "now")
    policy = policy if policy is not None else HealthPolicy()
    moments = [
        seen + grace
        for seen, grace in _timed(signals, policy).values()
        if seen is not None and seen + grace > now
    ]
    return min(moments) if moments else None


def assess_fleet(
    signals: Mapping[str, Signals],
    previous: Mapping[str, MachineHealth],
    now: datetime,
    policy: HealthPolicy | None = None,
    *,
    watching_since: datetime | None = None,
) -> dict[str, MachineHealth]:
    """Every machine's health now, each from its signals and its last assessment."""
    return {
        m: assess(s, now, policy, previous.get(m), watching_since)
        for m, s in sorted(signals.items())
    }


def changes(
    before: Mapping[str, MachineHealth], after: Mapping[str, MachineHealth]
) -> tuple[str, ...]:
    """One line per machine whose health state changed (or appeared), for the log."""
    return tuple(
        f"machine {m}: {h.sentence}"
        for m, h in sorted(after.items())
        if m not in before or before[m].state is not h.state
    )
