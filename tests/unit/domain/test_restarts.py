"""Restarting a model server after it exits: the kubelet's back-off and the states it passes."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.restarts import (
    KUBELET,
    UNWATCHED_AFTER,
    RestartPolicy,
    as_seen,
    backoff,
    due,
    restart_notice,
    restarted,
    retry_after_s,
    seen_exited,
    server_exited,
    start_failed,
    streak_after,
)
from nodeau.domain.runs import EndpointBack, NameTaken, run_step
from nodeau.domain.workloads import (
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
    holds_gpu,
    ps_sentence,
)
from tests.support.builders.restarts import KILLED, at, serving

S = WorkloadState


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


# ---------------------------------------------------------------- the back-off


@pytest.mark.parametrize(
    ("streak", "seconds"),
    [(1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 300), (7, 300), (1000, 300)],
)
def test_the_kubelet_backoff_doubles_from_10_s_and_stops_at_5_minutes(
    streak: int, seconds: int
) -> None:
    assert backoff(KUBELET, streak) == timedelta(seconds=seconds)


def test_the_kubelet_policy_is_written_out() -> None:
    assert (
        RestartPolicy(
            first_delay=timedelta(seconds=10),
            max_delay=timedelta(minutes=5),
            reset_after=timedelta(minutes=10),
        )
        == KUBELET
    )


def test_a_streak_counts_from_one() -> None:
    with pytest.raises(ValueError, match=exactly("a streak counts ends from 1, got 0")):
        backoff(KUBELET, 0)


@pytest.mark.parametrize(
    ("streak", "ran_for", "expected"),
    [
        (0, timedelta(seconds=1), 1),
        (3, timedelta(seconds=1), 4),
        (3, None, 4),
        (3, timedelta(minutes=9, seconds=59), 4),
        (3, timedelta(minutes=10), 1),
        (7, timedelta(hours=5), 1),
    ],
)
def test_ten_minutes_of_running_well_start_a_new_streak(
    streak: int, ran_for: timedelta | None, expected: int
) -> None:
    assert streak_after(streak, ran_for, KUBELET) == expected


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"first_delay": timedelta(0)}, "a restart policy's delays are positive"),
        ({"reset_after": timedelta(seconds=-1)}, "a restart policy's delays are positive"),
        (
            {"first_delay": timedelta(minutes=6)},
            "a restart policy's largest delay is at least its first",
        ),
    ],
)
def test_impossible_policies_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        RestartPolicy(**changes)


@given(st.integers(1, 10_000))
def test_the_backoff_never_shrinks_and_stays_within_its_bounds(streak: int) -> None:
    delay = backoff(KUBELET, streak)
    assert KUBELET.first_delay <= delay <= KUBELET.max_delay
    assert backoff(KUBELET, streak + 1) >= delay


# ---------------------------------------------------------------- the states


def test_an_exit_makes_a_serving_workload_restarting_and_keeps_its_card() -> None:
    w = server_exited(serving(), KILLED, timedelta(minutes=30), KUBELET)
    assert (w.state, w.since, w.last_exit, w.crash_streak) == (S.RESTARTING, KILLED.at, KILLED, 1)
    assert w.next_attempt == at("09:30:15")
    assert holds_gpu(w.state)
    assert ps_sentence(w, at("09:30:09")) == (
        "restarting on m1 (GPU-1a2b…) since 09:30:05 (4s): its model server was killed by"
        " signal 9 (SIGKILL) at 09:30:05; restart 1, next attempt at 09:30:15"
    )


def test_a_quick_second_exit_waits_twice_as_long() -> None:
    first = server_exited(serving(), KILLED, timedelta(seconds=3), KUBELET)
    up = restarted(first, at("09:30:15"))
    segv = ServerExit.killed(11, "SIGSEGV", at("09:30:20"))
    second = server_exited(up, segv, timedelta(seconds=5), KUBELET)
    assert (second.crash_streak, second.restarts) == (2, 1)
    assert second.next_attempt == at("09:30:40")
    assert ps_sentence(second, at("09:30:21")) == (
        "restarting on m1 (GPU-1a2b…) since 09:30:20 (1s): its model server was killed by"
        " signal 11 (SIGSEGV) at 09:30:20; restart 2, next attempt at 09:30:40"
    )


def test_a_restart_serves_again_and_says_after_what() -> None:
    w = restarted(server_exited(serving(), KILLED, None, KUBELET), at("09:30:15"))
    assert (w.state, w.since, w.restarts, w.next_attempt) == (S.SERVING, at("09:30:15"), 1, None)
    assert ps_sentence(w, at("09:31:15")) == (
        "serving on m1 (GPU-1a2b…) since 09:30:15 (1m), restarted once after its model server"
        " was killed by signal 9 (SIGKILL) at 09:30:05; nothing to do"
    )


def test_a_batch_job_runs_again_after_its_restart() -> None:
    job = serving(kind=WorkloadKind.BATCH, state=S.RUNNING)
    w = restarted(server_exited(job, KILLED, None, KUBELET), at("09:30:15"))
    assert w.state is S.RUNNING


def test_a_failed_start_stays_restarting_and_waits_one_step_longer() -> None:
    w = server_exited(serving(), KILLED, None, KUBELET)
    failed = ServerExit.exited(1, at("09:30:16"), starting=True)
    again = start_failed(w, failed, KUBELET)
    assert (again.state, again.since, again.restarts, again.crash_streak) == (
        S.RESTARTING,
        at("09:30:05"),
        1,
        2,
    )
    assert again.next_attempt == at("09:30:36")
    assert ps_sentence(again, at("09:30:17")) == (
        "restarting on m1 (GPU-1a2b…) since 09:30:05 (12s): its model server exited with code 1"
        " while starting at 09:30:16; restart 2, next attempt at 09:30:36"
        " (nodeau logs tiny shows its log)"
    )


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (lambda: server_exited(serving(state=S.STARTING), KILLED, None, KUBELET),
         "only a serving or running workload's server exits, not starting"),
        (lambda: restarted(serving(), at("09:00:00")),
         "only a restarting workload is restarted, not serving"),
        (lambda: start_failed(serving(), KILLED, KUBELET),
         "only a restarting workload's start fails, not serving"),
        (lambda: restart_notice(serving()), "tiny is not restarting"),
    ],
)  # fmt: skip
def test_steps_from_the_wrong_state_are_refused(step: Any, message: str) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        step()


@pytest.mark.parametrize(
    ("now", "expected"),
    [("09:30:14", False), ("09:30:15", True), ("09:40:00", True)],
)
def test_a_restart_is_due_at_its_next_attempt(now: str, expected: bool) -> None:
    w = server_exited(serving(), KILLED, None, KUBELET)
    assert due(w, at(now)) is expected
    assert due(serving(), at(now)) is False


@pytest.mark.parametrize(
    ("now", "seconds"),
    [("09:30:05", 11), ("09:30:14", 2), ("09:30:15", 1), ("09:31:00", 1)],
)
def test_a_client_is_told_to_come_back_after_the_next_attempt(now: str, seconds: int) -> None:
    w = server_exited(serving(), KILLED, None, KUBELET)
    assert retry_after_s(w, at(now)) == seconds


def test_the_notice_names_the_workload_the_end_and_the_next_attempt() -> None:
    w = server_exited(serving(), KILLED, None, KUBELET)
    assert restart_notice(w) == (
        "tiny is restarting: its model server was killed by signal 9 (SIGKILL) at 09:30:05;"
        " restart 1, next attempt at 09:30:15"
    )


def test_ps_shows_a_server_found_gone_as_exited() -> None:
    gone = ServerExit.unknown(at("09:30:06"))
    w = seen_exited(serving(), gone)
    assert (w.state, w.since, w.last_exit) == (S.EXITED, at("09:30:06"), gone)
    assert holds_gpu(w.state)
    assert ps_sentence(w, at("09:30:07")) == (
        "exited on m1 (GPU-1a2b…) since 09:30:06 (1s): its model server's process was found"
        " gone at 09:30:06 (exit status unknown); its endpoint restarts it if it runs; if not,"
        " nodeau run tiny starts the endpoint again"
    )


def test_a_restart_long_overdue_has_nobody_to_make_it_and_is_shown_exited() -> None:
    w = server_exited(serving(), KILLED, None, KUBELET)
    assert as_seen(w, at("09:30:15") + UNWATCHED_AFTER) == w
    late = as_seen(w, at("09:30:16") + UNWATCHED_AFTER)
    assert (late.state, late.since, late.next_attempt) == (S.EXITED, at("09:30:05"), None)
    assert as_seen(serving(), at("10:00:00")) == serving()


def test_running_a_restarting_service_again_brings_its_endpoint_back() -> None:
    w = server_exited(serving(), KILLED, None, KUBELET)
    assert run_step(w, artifact_id="9f2c") == EndpointBack(workload=w)
    assert isinstance(run_step(w, artifact_id="other"), NameTaken)
    job = server_exited(serving(kind=WorkloadKind.BATCH, state=S.RUNNING), KILLED, None, KUBELET)
    assert isinstance(run_step(job, artifact_id="9f2c"), NameTaken)


S = WorkloadState
NAIVE = datetime(2026, 11, 30, 9, 30, 0)  # no timezone


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
