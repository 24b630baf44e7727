"""A model server's end as recorded: which ends happen during a start (a server not ready
in time, one that could not be started) and which only when said so (an exit, a kill), in
the words ``nodeau ps`` prints; and a workload back to starting after a restart says
nothing of restarts until it serves again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodeau.domain.workloads import ServerExit, WorkloadState, exit_words, ps_sentence
from tests.unit.domain.test_workloads import workload

AT = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def test_a_server_not_ready_in_time_or_not_started_ended_during_its_start() -> None:
    assert ServerExit.not_ready(30, AT).starting is True
    assert ServerExit.not_started("no such file", AT).starting is True


def test_an_exit_or_a_kill_is_during_a_start_only_when_said_so() -> None:
    assert ServerExit.exited(1, AT).starting is False
    assert ServerExit.killed(9, "SIGKILL", AT).starting is False
    assert exit_words(ServerExit.exited(1, AT)) == "its model server exited with code 1 at 06:00:00"
    assert exit_words(ServerExit.killed(9, "SIGKILL", AT, starting=True)) == (
        "its model server was killed by signal 9 (SIGKILL) while starting at 06:00:00"
    )


def test_a_workload_starting_again_after_a_restart_says_nothing_of_restarts_yet() -> None:
    exit_ = ServerExit.exited(1, AT)
    again = workload(state=WorkloadState.STARTING, restarts=1, last_exit=exit_, since=AT)
    fresh = workload(state=WorkloadState.STARTING, since=AT)
    now = AT + timedelta(seconds=2)
    assert ps_sentence(again, now) == ps_sentence(fresh, now)
    assert ps_sentence(again, now).startswith("starting on garage (")
    assert "restarted" not in ps_sentence(again, now)
    serving = workload(state=WorkloadState.SERVING, restarts=1, last_exit=exit_, since=AT)
    assert ", restarted once after its model server exited with code 1 at 06:00:00;" in (
        ps_sentence(serving, now)
    )
