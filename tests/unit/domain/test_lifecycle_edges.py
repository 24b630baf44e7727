"""The lifecycle's edges (domain/lifecycle.py): what a Pod may say of its server's restarts
(each refusal word for word, a zero back-off allowed), a workload restarted in place at
each boundary of "again" and of the streak, its next attempt counted from its end, the
next step and next attempt dropped where they no longer belong."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from nodeau.domain.health import Health
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts, restarted_in_place, with_state
from nodeau.domain.workloads import ServerExit, WorkloadState
from tests.unit.domain.test_lifecycle import ENDED, NOW, OOM, record, serving

S = WorkloadState
P = ServerPhase
EARLIER = ServerExit.exited(1, ENDED - timedelta(minutes=3))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"down": True}, "a server that is down has a last end"),
        ({"backing_off": True}, "only a server that is down backs off"),
        (
            {"last_exit": OOM, "down": True, "backing_off": True, "backoff": timedelta(-1)},
            "a back-off belongs to a server backing off, and is not negative",
        ),
        (
            {"last_exit": OOM, "down": True, "running_since": NOW},
            "a server that is down has no run going",
        ),
        (
            {"running_since": datetime(2026, 3, 1, 12, 0)},
            "running_since must carry a timezone, got 2026-03-01T12:00:00",
        ),
    ],
)
def test_what_a_pod_cannot_say_of_its_server_is_refused_in_these_words(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ServerRestarts(**fields)  # type: ignore[arg-type]


def test_a_back_off_of_nothing_is_a_back_off() -> None:
    seen = ServerRestarts(last_exit=OOM, down=True, backing_off=True, backoff=timedelta(0))
    assert seen.backoff == timedelta(0)


def test_a_restart_is_recorded_only_at_a_time_with_its_zone() -> None:
    naive = datetime(2026, 3, 1, 12, 0, 7)
    seen = ServerRestarts(count=1, last_exit=OOM)
    with pytest.raises(ValueError, match=r"^at must carry a timezone, got 2026-03-01T12:00:07$"):
        restarted_in_place(serving(), P.READY, seen, Health.REPORTING, naive)


def test_a_new_end_seen_ready_again_with_the_same_count_is_serving_again_since_now() -> None:
    w = serving(restarts=1, last_exit=EARLIER)
    seen = ServerRestarts(count=1, last_exit=OOM)
    after = restarted_in_place(w, P.READY, seen, Health.REPORTING, NOW)
    assert after is not None
    assert (after.state, after.since, after.last_exit) == (S.SERVING, NOW, OOM)


def test_a_starting_service_ready_after_an_end_it_knew_serves_since_now() -> None:
    w = serving(state=S.STARTING, restarts=1, last_exit=OOM)
    seen = ServerRestarts(count=1, last_exit=OOM)
    after = restarted_in_place(w, P.READY, seen, Health.REPORTING, NOW)
    assert after is not None
    assert (after.state, after.since, after.restarts) == (S.SERVING, NOW, 1)


def test_ready_again_drops_the_next_step_and_attempt_of_the_restart() -> None:
    w = serving(
        state=S.RESTARTING,
        since=ENDED,
        restarts=1,
        last_exit=OOM,
        next_attempt=ENDED + timedelta(seconds=10),
        next_step="it starts again at 12:00:15",
    )
    seen = ServerRestarts(count=1, last_exit=OOM)
    after = restarted_in_place(w, P.READY, seen, Health.REPORTING, NOW)
    assert after is not None
    assert (after.state, after.next_attempt, after.next_step) == (S.SERVING, None, None)


def test_a_new_end_drops_the_next_step_said_before_it() -> None:
    w = serving(next_step="nothing to do")
    seen = ServerRestarts(count=0, last_exit=OOM, down=True)
    after = restarted_in_place(w, P.STARTING, seen, Health.REPORTING, NOW)
    assert after is not None
    assert (after.state, after.next_step) == (S.RESTARTING, None)


def test_a_run_as_long_as_the_reset_starts_the_streak_again() -> None:
    w = serving(crash_streak=3, restarts=3, last_exit=EARLIER)
    seen = ServerRestarts(count=3, last_exit=OOM, ran_for=timedelta(minutes=10), down=True)
    after = restarted_in_place(w, P.STARTING, seen, Health.REPORTING, NOW)
    assert after is not None
    assert (after.crash_streak, after.next_attempt) == (1, ENDED + timedelta(seconds=10))


def test_a_restart_without_its_start_said_is_due_one_back_off_after_the_end() -> None:
    w = serving(crash_streak=0)
    seen = ServerRestarts(count=1, last_exit=OOM)  # restarted, not answering, no start said
    after = restarted_in_place(w, P.STARTING, seen, Health.REPORTING, NOW)
    assert after is not None
    assert (after.state, after.crash_streak, after.restarts) == (S.RESTARTING, 1, 0)
    assert after.next_attempt == ENDED + timedelta(seconds=10)


def test_a_next_attempt_belongs_to_restarting_alone() -> None:
    due = ENDED + timedelta(seconds=10)
    restarting = record(state=S.RESTARTING, since=ENDED, last_exit=OOM, next_attempt=due)
    assert with_state(restarting, S.RESTARTING, NOW).workload.next_attempt == due
    assert with_state(restarting, S.SERVING, NOW).workload.next_attempt is None
