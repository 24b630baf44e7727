"""A machine's assessment (domain/health.py ``assess``) at its edges: the moment it became
unreachable is kept when its signals went quiet exactly then, even when the assessor came
back later; a watching-since without its zone is refused in words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.health import Health, MachineHealth, Signal, Signals, assess

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
QUIET_AT_T = Signals(
    node_heartbeat_at=T - timedelta(seconds=40), agent_report_at=T - timedelta(seconds=30)
)


def test_the_recorded_moment_is_kept_when_the_signals_went_quiet_exactly_then() -> None:
    before = MachineHealth(
        state=Health.UNREACHABLE,
        since=T,
        quiet=frozenset({Signal.NODE_HEARTBEAT, Signal.AGENT_REPORT}),
        sentence="unreachable",
    )
    now = T + timedelta(minutes=5)
    found = assess(QUIET_AT_T, now, None, before, watching_since=T + timedelta(minutes=2))
    assert (found.state, found.since) == (Health.UNREACHABLE, T)


def test_a_watching_since_without_its_zone_is_refused_in_these_words() -> None:
    with pytest.raises(
        ValueError, match=r"^watching_since must carry a timezone, got 2026-03-01T12:00:00$"
    ):
        assess(QUIET_AT_T, T, watching_since=datetime(2026, 3, 1, 12, 0))
