"""The restart transitions on the inputs the other restart tests leave out: a server that
ran long enough starts its back-off again, an exit clears what was next, a notice or an
"exited" view only for a restarting workload (a record may still carry a past exit or a
stale next attempt)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from attrs import evolve

from nodeau.domain.restarts import KUBELET, as_seen, restart_notice, server_exited
from nodeau.domain.workloads import ServerExit, WorkloadState
from tests.support.builders.restarts import KILLED, at, serving

S = WorkloadState


def test_a_server_that_ran_ten_minutes_starts_the_back_off_again() -> None:
    w = serving(crash_streak=3, next_step="serving since 09:00:00")
    ended = server_exited(w, KILLED, timedelta(minutes=10), KUBELET)
    assert ended == evolve(
        w,
        state=S.RESTARTING,
        since=at("09:30:05"),
        last_exit=KILLED,
        crash_streak=1,
        next_attempt=at("09:30:15"),
        next_step=None,
    )


def test_a_server_that_ran_less_counts_one_more_end_in_a_row() -> None:
    w = serving(crash_streak=3)
    ended = server_exited(w, KILLED, timedelta(minutes=9, seconds=59), KUBELET)
    assert (ended.crash_streak, ended.next_attempt) == (4, at("09:31:25"))


def test_only_a_restarting_workload_gets_a_restart_notice() -> None:
    before = ServerExit.killed(9, "SIGKILL", at("08:00:00"))
    w = serving(last_exit=before)  # restarted once: its last exit is kept
    with pytest.raises(ValueError, match=f"^{re.escape('tiny is not restarting')}$"):
        restart_notice(w)


def test_a_serving_workload_is_shown_as_it_is_whatever_next_attempt_it_carries() -> None:
    w = serving(last_exit=KILLED, next_attempt=at("09:00:00"))
    assert as_seen(w, at("12:00:00")) == w
