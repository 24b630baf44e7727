"""A recovery's record refuses what cannot have happened, each with its own sentence: a
naive time, a move onto the same machine, a move before the delay had passed (the moment
the delay ends is allowed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.workloads import Recovery

SINCE = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
DELAY = timedelta(minutes=3)


def recovery(**changes: object) -> Recovery:
    fields: dict[str, object] = {
        "from_machine": "garage",
        "to_machine": "attic",
        "at": SINCE + DELAY,
        "unreachable_since": SINCE,
        "after": DELAY,
        **changes,
    }
    return Recovery(**fields)  # type: ignore[arg-type]


def refused(**changes: object) -> str:
    with pytest.raises(ValueError) as raised:
        recovery(**changes)
    return str(raised.value)


def test_a_recovery_at_the_moment_its_delay_ends_is_recorded() -> None:
    assert recovery().at == datetime(2026, 12, 1, 6, 3, tzinfo=UTC)


def test_a_recovery_a_second_before_its_delay_ends_is_refused() -> None:
    early = SINCE + DELAY - timedelta(seconds=1)
    assert refused(at=early) == "a recovery is never made before its delay has passed"


def test_a_recovery_onto_the_same_machine_is_refused() -> None:
    assert refused(to_machine="garage") == "a workload recovers onto another machine"


def test_naive_times_are_refused_naming_which() -> None:
    naive = datetime(2026, 12, 1, 6, 3)
    assert refused(at=naive) == ("a recovery's time must carry a timezone, got 2026-12-01T06:03:00")
    assert refused(unreachable_since=naive, at=naive.replace(tzinfo=UTC)) == (
        "unreachable_since must carry a timezone, got 2026-12-01T06:03:00"
    )
