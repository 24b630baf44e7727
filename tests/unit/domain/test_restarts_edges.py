"""The restart rules' edges: naive clocks refused by name, the bounds of a policy, and
what each transition clears (a stale "next attempt" or "what happens next" would be shown)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.restarts import (
    RestartPolicy,
    as_seen,
    due,
    restarted,
    retry_after_s,
    seen_exited,
)
from nodeau.domain.workloads import ServerExit, Workload, WorkloadKind, WorkloadState

S = WorkloadState
NAIVE = datetime(2026, 11, 30, 9, 30, 0)  # no timezone


def at(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(2026, 11, 30, h, m, s, tzinfo=UTC)


def restarting(**changes: object) -> Workload:
    fields: dict[str, object] = {
        "name": "tiny",
        "kind": WorkloadKind.SERVICE,
        "model": "tiny",
        "artifact_id": "9f2c",
        "machine": "m1",
        "gpu_uuid": "GPU-1",
        "state": S.RESTARTING,
        "since": at("09:00:00"),
        "last_exit": ServerExit.killed(9, "SIGKILL", at("09:00:00")),
        "crash_streak": 1,
        "next_attempt": at("09:00:10"),
        "next_step": "restarts at 09:00:10",
    }
    fields.update(changes)
    return Workload(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call",
    [
        lambda: due(restarting(), NAIVE),
        lambda: as_seen(restarting(), NAIVE),
        lambda: retry_after_s(restarting(), NAIVE),
    ],
    ids=["due", "as_seen", "retry_after_s"],
)
def test_a_naive_now_is_refused_by_its_name(call: object) -> None:
    message = f"now must carry a timezone, got {NAIVE.isoformat()}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()  # type: ignore[operator]


def test_a_policy_whose_largest_delay_is_its_first_never_grows() -> None:
    one = timedelta(seconds=10)
    assert RestartPolicy(first_delay=one, max_delay=one).max_delay == one


def test_a_policy_that_never_resets_the_count_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^a restart policy's delays are positive$"):
        RestartPolicy(reset_after=timedelta(0))


def test_a_restart_overdue_and_unwatched_is_shown_exited_with_nothing_next() -> None:
    seen = as_seen(restarting(), at("09:10:00"))
    assert (seen.state, seen.next_attempt, seen.next_step) == (S.EXITED, None, None)


def test_a_restarted_server_has_no_next_attempt_and_no_next_step() -> None:
    up = restarted(restarting(), at("09:00:12"))
    assert (up.state, up.since, up.restarts, up.next_attempt, up.next_step) == (
        S.SERVING,
        at("09:00:12"),
        1,
        None,
        None,
    )


def test_a_server_found_gone_is_exited_and_keeps_no_stale_next_attempt() -> None:
    ended = ServerExit.killed(9, "SIGKILL", at("09:30:05"))
    stale = restarting(state=S.SERVING, last_exit=None, crash_streak=0, next_step=None)
    gone = seen_exited(stale, ended)
    assert (gone.state, gone.since, gone.last_exit, gone.next_attempt) == (
        S.EXITED,
        at("09:30:05"),
        ended,
        None,
    )
