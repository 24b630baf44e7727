"""Workload values at their edges (domain/workloads.py): a recovery's refusals word for word
and its delay's boundary, how each kind of server end says whether it came while starting,
and a workload not up again says nothing of its restarts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from attrs import evolve

from nodeau.domain.workloads import Recovery, ServerExit, WorkloadState, ps_sentence
from tests.unit.domain.test_lifecycle import OOM, serving

SINCE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DELAY = timedelta(minutes=2)


def recovery(**changes: object) -> Recovery:
    base = Recovery(
        from_machine="m1", to_machine="m2", at=SINCE + DELAY, unreachable_since=SINCE, after=DELAY
    )
    return evolve(base, **changes)  # type: ignore[arg-type]


def test_a_recovery_exactly_its_delay_after_the_machine_went_quiet_is_made() -> None:
    assert recovery().at == SINCE + DELAY


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"to_machine": "m1"}, "a workload recovers onto another machine"),
        (
            {"at": SINCE + DELAY - timedelta(seconds=1)},
            "a recovery is never made before its delay has passed",
        ),
        (
            {"at": SINCE + timedelta(minutes=1)},
            "a recovery is never made before its delay has passed",
        ),
        (
            {"at": datetime(2026, 3, 1, 12, 5)},
            "a recovery's time must carry a timezone, got 2026-03-01T12:05:00",
        ),
        (
            {"unreachable_since": datetime(2026, 3, 1, 12, 0)},
            "unreachable_since must carry a timezone, got 2026-03-01T12:00:00",
        ),
    ],
)
def test_a_recovery_that_cannot_have_happened_is_refused_in_these_words(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        recovery(**changes)


def test_each_kind_of_end_says_whether_it_came_while_starting() -> None:
    assert ServerExit.exited(1, SINCE).starting is False
    assert ServerExit.exited(1, SINCE, starting=True).starting is True
    assert ServerExit.killed(9, "SIGKILL", SINCE).starting is False
    assert ServerExit.killed(9, "SIGKILL", SINCE, starting=True).starting is True
    assert ServerExit.not_ready(60.0, SINCE).starting is True
    assert ServerExit.not_started("no such file", SINCE).starting is True


def test_a_workload_not_up_again_says_nothing_of_its_restarts() -> None:
    w = serving(state=WorkloadState.STARTING, since=SINCE, restarts=2, last_exit=OOM)
    said = ps_sentence(w, SINCE + timedelta(seconds=5))
    assert said == "starting on m1 (GPU-1) since 12:00:00 (5s); it serves once its model has loaded"
