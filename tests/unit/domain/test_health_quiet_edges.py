"""When a machine's health can next change (domain/health.py ``next_quiet``): a signal that
goes quiet exactly now is quiet already, the policy given is the one counted, and a time
without its zone is refused in words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.health import HealthPolicy, Signals, next_quiet

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_signal_whose_grace_ends_exactly_now_is_quiet_already() -> None:
    signals = Signals(
        node_heartbeat_at=NOW - timedelta(seconds=40), agent_report_at=NOW - timedelta(seconds=30)
    )
    assert next_quiet(signals, NOW) is None
    later = Signals(node_heartbeat_at=NOW - timedelta(seconds=40), agent_report_at=NOW)
    assert next_quiet(later, NOW) == NOW + timedelta(seconds=30)


def test_the_next_quiet_moment_is_counted_by_the_policy_given() -> None:
    signals = Signals(node_heartbeat_at=NOW, agent_report_at=NOW)
    policy = HealthPolicy(node_grace=timedelta(minutes=3), agent_grace=timedelta(minutes=2))
    assert next_quiet(signals, NOW, policy) == NOW + timedelta(minutes=2)


def test_a_now_without_its_zone_is_refused_in_these_words() -> None:
    signals = Signals(node_heartbeat_at=NOW, agent_report_at=NOW)
    with pytest.raises(ValueError, match=r"^now must carry a timezone, got 2026-03-01T12:00:00$"):
        next_quiet(signals, datetime(2026, 3, 1, 12, 0))
