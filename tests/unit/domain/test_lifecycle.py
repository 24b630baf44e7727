"""A workload's next state from its model server's phase and its machine's health: the matrix."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from attrs import evolve
from hypothesis import assume, given
from hypothesis import strategies as st

from nodeau.domain.health import Health
from nodeau.domain.lifecycle import (
    LIVE,
    ServerPhase,
    ServerRestarts,
    needs_server,
    next_state,
    restarted_in_place,
    server_moved,
    with_state,
)
from nodeau.domain.workloads import (
    HeldReason,
    Recovery,
    RecoveryMode,
    ServerExit,
    WorkloadKind,
    WorkloadState,
    holds_gpu,
    ps_sentence,
)
from tests.support.builders.lifecycle import ENDED, OOM, SINCE, UP_AT, record, serving

S = WorkloadState
P = ServerPhase
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
PHASES = (P.ABSENT, P.STARTING, P.READY, P.EXITED_OK, P.EXITED_FAILED, P.DELETING)
NOTHING = (None, None, None, None, None, None)

# the next state of each state (rows) for each phase (columns, in PHASES' order);
# None: it stays as it is
SERVICE_MATRIX = {
    S.ADMITTED: (S.STARTING, S.STARTING, S.SERVING, S.FAILED, S.FAILED, None),
    S.STARTING: (None, None, S.SERVING, S.FAILED, S.FAILED, None),
    S.SERVING: (S.STARTING, None, None, S.FAILED, S.FAILED, None),
    S.RESTARTING: (None, None, S.SERVING, None, None, None),
    S.EXITED: NOTHING,
    S.HELD: NOTHING,
    # a recovering workload's new server starts on the machine it moved to
    S.RECOVERING: (None, None, S.SERVING, S.FAILED, S.FAILED, None),
    S.SUCCEEDED: NOTHING,
    S.FAILED: NOTHING,
    S.STOPPED: NOTHING,
}
BATCH_MATRIX = {
    S.ADMITTED: (S.STARTING, S.STARTING, S.RUNNING, S.SUCCEEDED, S.FAILED, None),
    S.STARTING: (None, None, S.RUNNING, S.SUCCEEDED, S.FAILED, None),
    S.RUNNING: (S.STARTING, None, None, S.SUCCEEDED, S.FAILED, None),
    S.RESTARTING: (None, None, S.RUNNING, None, None, None),
    S.EXITED: NOTHING,
    S.HELD: NOTHING,
    S.SUCCEEDED: NOTHING,
    S.FAILED: NOTHING,
    S.STOPPED: NOTHING,
}


def cases(
    kind: WorkloadKind, matrix: dict[WorkloadState, tuple[WorkloadState | None, ...]]
) -> list[tuple[WorkloadKind, WorkloadState, ServerPhase, WorkloadState | None]]:
    return [
        (kind, state, phase, expected)
        for state, row in matrix.items()
        for phase, expected in zip(PHASES, row, strict=True)
    ]


MATRIX = cases(SERVICE, SERVICE_MATRIX) + cases(BATCH, BATCH_MATRIX)


@pytest.mark.parametrize(("kind", "state", "phase", "expected"), MATRIX)
@pytest.mark.parametrize("machine", [Health.REPORTING, Health.DEGRADED, Health.UPGRADING, None])
def test_the_server_phase_moves_the_workload(
    kind: WorkloadKind,
    state: WorkloadState,
    phase: ServerPhase,
    expected: WorkloadState | None,
    machine: Health | None,
) -> None:
    assert next_state(state, kind, phase, machine) == expected


@pytest.mark.parametrize(("kind", "state", "phase", "expected"), MATRIX)
def test_nothing_moves_on_an_unreachable_machine(
    kind: WorkloadKind, state: WorkloadState, phase: ServerPhase, expected: WorkloadState | None
) -> None:
    assert next_state(state, kind, phase, Health.UNREACHABLE) is None


# whether a server is made: only when there is none, for a workload that holds its card
# and is not recovery's (columns: reporting, unreachable)
NEEDS_SERVER = {
    S.ADMITTED: (True, False),
    S.STARTING: (True, False),
    S.SERVING: (True, False),
    S.RUNNING: (True, False),
    S.RESTARTING: (False, False),
    S.EXITED: (False, False),
    S.HELD: (False, False),
    S.RECOVERING: (True, False),  # its new server, on the machine it moved to
    S.SUCCEEDED: (False, False),
    S.FAILED: (False, False),
    S.STOPPED: (False, False),
}


@pytest.mark.parametrize(("state", "expected"), NEEDS_SERVER.items())
def test_a_server_is_made_only_when_there_is_none_and_the_workload_wants_one(
    state: WorkloadState, expected: tuple[bool, bool]
) -> None:
    reporting, unreachable = expected
    assert needs_server(state, P.ABSENT, Health.REPORTING) is reporting
    assert needs_server(state, P.ABSENT, Health.DEGRADED) is reporting
    assert needs_server(state, P.ABSENT, None) is reporting
    assert needs_server(state, P.ABSENT, Health.UNREACHABLE) is unreachable
    for phase in PHASES[1:]:
        assert needs_server(state, phase, Health.REPORTING) is False


@pytest.mark.parametrize(("state", "expected"), NEEDS_SERVER.items())
def test_where_servers_restart_in_place_a_restarting_workload_whose_server_went_gets_one(
    state: WorkloadState, expected: tuple[bool, bool]
) -> None:
    reporting, unreachable = expected
    if state is S.RESTARTING:
        reporting = True
    assert needs_server(state, P.ABSENT, Health.REPORTING, in_place=True) is reporting
    assert needs_server(state, P.ABSENT, Health.UNREACHABLE, in_place=True) is unreachable
    for phase in PHASES[1:]:
        assert needs_server(state, phase, Health.REPORTING, in_place=True) is False


LATER = SINCE + timedelta(minutes=5)


def test_with_state_moves_the_state_and_its_since_and_keeps_the_rest() -> None:
    before = record()
    after = with_state(before, S.STOPPED, LATER)
    assert (after.workload.state, after.workload.since) == (S.STOPPED, LATER)
    assert (after.workload.machine, after.workload.gpu_uuid) == ("m1", "GPU-1")
    assert (after.config, after.model_path) == (before.config, before.model_path)


@given(
    state=st.sampled_from(list(S)),
    kind=st.sampled_from(list(WorkloadKind)),
    server=st.sampled_from(list(ServerPhase)),
)
def test_a_servers_phase_moves_a_record_as_next_state_says_and_nothing_else(
    state: WorkloadState, kind: WorkloadKind, server: ServerPhase
) -> None:
    try:
        before = record(state=state, kind=kind)
    except ValueError:  # a state that needs more of its record (restarting: its last end)
        assume(False)
        raise
    after = server_moved(before, server, LATER)
    wanted = next_state(state, kind, server, None)
    if wanted is None:
        assert after is before
    else:
        assert after == with_state(before, wanted, LATER)


def test_one_machines_start_serve_and_failure_are_the_lifecycles_moves() -> None:
    admitted = record(state=S.ADMITTED)
    starting = server_moved(admitted, ServerPhase.ABSENT, LATER)
    assert starting.workload.state is S.STARTING
    assert server_moved(starting, ServerPhase.READY, LATER).workload.state is S.SERVING
    batch = record(state=S.STARTING, kind=WorkloadKind.BATCH)
    assert server_moved(batch, ServerPhase.READY, LATER).workload.state is S.RUNNING
    assert server_moved(starting, ServerPhase.EXITED_FAILED, LATER).workload.state is S.FAILED


def test_with_state_drops_what_belonged_to_held_and_keeps_the_recovery_made() -> None:
    held = record(
        state=S.HELD,
        held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
        next_step="it waits for m1",
    )
    back = with_state(held, S.STARTING, LATER)
    assert (back.workload.state, back.workload.held_reason, back.workload.next_step) == (
        S.STARTING,
        None,
        None,
    )
    made = Recovery(
        from_machine="m2",
        to_machine="m1",
        at=SINCE,
        unreachable_since=SINCE - timedelta(minutes=3),
        after=timedelta(minutes=3),
    )
    moving = record(
        state=S.RECOVERING,
        recovery_mode=RecoveryMode.AUTOMATIC,
        recoveries=1,
        last_recovery=made,
    )
    serving = with_state(moving, S.SERVING, LATER)
    assert (serving.workload.state, serving.workload.last_recovery) == (S.SERVING, made)
    assert serving.workload.recoveries == 1


def test_with_state_refuses_a_state_the_workload_cannot_be_in() -> None:
    with pytest.raises(ValueError, match="only a batch job runs"):
        with_state(record(), S.RUNNING, LATER)


# -- a server restarted in place (a Pod's container, by its kubelet)

NOW = datetime(2026, 3, 1, 12, 0, 7, tzinfo=UTC)
TEN_S = timedelta(seconds=10)


def crash_looping(exit_: ServerExit = OOM, count: int = 1, **fields: Any) -> ServerRestarts:
    seen = {"count": count, "last_exit": exit_, "ran_for": timedelta(hours=1), "down": True}
    return ServerRestarts(**{"backing_off": True, "backoff": TEN_S, **seen, **fields})


def test_an_end_the_kubelet_reports_makes_a_serving_service_restarting_and_keeps_its_card() -> None:
    after = restarted_in_place(serving(), P.STARTING, crash_looping(), Health.REPORTING, NOW)
    assert after == serving(
        state=S.RESTARTING,
        since=ENDED,
        restarts=1,
        last_exit=OOM,
        crash_streak=1,
        next_attempt=ENDED + TEN_S,
    )
    assert holds_gpu(after.state)
    assert ps_sentence(after, NOW) == (
        "restarting on m1 (GPU-1) since 12:00:05 (2s): its model server was killed by "
        "signal 9 (OOMKilled) at 12:00:05; restart 2, next attempt at 12:00:15"
    )


def test_the_announced_back_off_wins_and_without_one_the_kubelet_policy_counts() -> None:
    announced = crash_looping(backoff=timedelta(seconds=40), count=3)
    after = restarted_in_place(serving(), P.STARTING, announced, None, NOW)
    assert after is not None and after.next_attempt == ENDED + timedelta(seconds=40)
    ended = ServerExit.exited(1, ENDED)
    just_ended = ServerRestarts(count=0, last_exit=ended, down=True)  # no back-off said
    after = restarted_in_place(serving(crash_streak=2), P.STARTING, just_ended, None, NOW)
    assert after is not None
    assert (after.restarts, after.crash_streak, after.next_attempt) == (
        0,
        3,  # it ran for an unknown while: one more end in the streak
        ENDED + timedelta(seconds=40),
    )
    assert ps_sentence(after, NOW) == (
        "restarting on m1 (GPU-1) since 12:00:05 (2s): its model server exited with code 1 "
        "at 12:00:05; restart 1, next attempt at 12:00:45"
    )


def test_a_restart_under_way_is_the_next_attempt_made_when_it_started() -> None:
    started = ENDED + timedelta(seconds=1)
    killed = ServerExit.killed(9, "SIGKILL", ENDED)
    under_way = ServerRestarts(count=1, last_exit=killed, running_since=started)
    after = restarted_in_place(serving(), P.STARTING, under_way, None, NOW)
    assert after is not None
    assert (after.state, after.restarts, after.next_attempt) == (S.RESTARTING, 0, started)
    assert ps_sentence(after, NOW).endswith(
        "killed by signal 9 (SIGKILL) at 12:00:05; restart 1, next attempt at 12:00:06"
    )


def test_ready_again_it_serves_again_its_restart_count_and_end_kept() -> None:
    restarting = restarted_in_place(serving(), P.STARTING, crash_looping(), None, NOW)
    assert restarting is not None
    later = NOW + timedelta(seconds=20)
    up = ServerRestarts(count=2, last_exit=OOM, ran_for=timedelta(hours=1), running_since=NOW)
    back = restarted_in_place(restarting, P.READY, up, None, later)
    assert back == evolve(restarting, state=S.SERVING, since=later, restarts=2, next_attempt=None)
    assert ps_sentence(back, later + timedelta(seconds=3)) == (
        "serving on m1 (GPU-1) since 12:00:27 (3s), restarted 2 times, last after its model "
        "server was killed by signal 9 (OOMKilled) at 12:00:05; nothing to do"
    )
    # settled: what the Pod says changes nothing more
    assert restarted_in_place(back, P.READY, up, None, later + TEN_S) is None
    # a busy server that stops answering for a while is no new end
    assert restarted_in_place(back, P.STARTING, up, None, later + TEN_S) is None


def test_a_restart_made_and_ready_before_anyone_looked_still_says_it_restarted() -> None:
    up = ServerRestarts(count=1, last_exit=OOM, running_since=ENDED)
    back = restarted_in_place(serving(), P.READY, up, None, NOW)
    assert back == serving(since=NOW, restarts=1, last_exit=OOM)


def test_an_end_while_starting_is_said_so_and_points_at_the_log() -> None:
    starting = serving(state=S.STARTING, since=UP_AT)
    ended = ServerExit.exited(1, ENDED)
    after = restarted_in_place(starting, P.STARTING, crash_looping(ended, count=0), None, NOW)
    assert after is not None and after.last_exit == ServerExit.exited(1, ENDED, starting=True)
    assert ps_sentence(after, NOW) == (
        "restarting on m1 (GPU-1) since 12:00:05 (2s): its model server exited with code 1 "
        "while starting at 12:00:05; restart 1, next attempt at 12:00:15 "
        "(nodeau logs chat shows its log)"
    )


def test_further_ends_keep_the_restarting_since_and_count_the_streak() -> None:
    first = restarted_in_place(serving(), P.STARTING, crash_looping(), None, NOW)
    assert first is not None
    again_at = ENDED + timedelta(seconds=30)
    again = ServerExit.killed(9, "OOMKilled", again_at)
    quick = crash_looping(again, count=2, ran_for=timedelta(seconds=5), backoff=None)
    second = restarted_in_place(first, P.STARTING, quick, None, again_at)
    assert second is not None
    assert (second.since, second.restarts, second.crash_streak) == (ENDED, 2, 2)
    assert second.last_exit == evolve(again, starting=True)  # it ended during a restart
    assert second.next_attempt == again_at + timedelta(seconds=20)


@pytest.mark.parametrize(
    ("state", "phase", "machine"),
    [
        (S.SERVING, P.ABSENT, None),
        (S.SERVING, P.DELETING, None),
        (S.SERVING, P.EXITED_FAILED, None),
        (S.SERVING, P.STARTING, Health.UNREACHABLE),
        (S.HELD, P.STARTING, None),
        (S.FAILED, P.READY, None),
    ],
)
def test_nothing_is_recorded_where_restarts_are_not_the_servers_to_say(
    state: WorkloadState, phase: ServerPhase, machine: Health | None
) -> None:
    fields: dict[str, Any] = {"state": state}
    if state is S.HELD:
        fields["held_reason"] = HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF
    assert restarted_in_place(serving(**fields), phase, crash_looping(), machine, NOW) is None


def test_a_server_that_never_ended_is_left_to_next_state() -> None:
    for phase in PHASES:
        assert restarted_in_place(serving(), phase, ServerRestarts(), None, NOW) is None


def test_a_batch_job_restarts_and_runs_again() -> None:
    running = serving(kind=BATCH, state=S.RUNNING)
    after = restarted_in_place(running, P.STARTING, crash_looping(), None, NOW)
    assert after is not None and after.state is S.RESTARTING
    up = ServerRestarts(count=2, last_exit=OOM, running_since=NOW)
    back = restarted_in_place(after, P.READY, up, None, NOW + TEN_S)
    assert back is not None and (back.state, back.restarts) == (S.RUNNING, 2)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"count": -1}, "counts from 0"),
        ({"down": True}, "has a last end"),
        ({"last_exit": OOM, "backing_off": True}, "only a server that is down backs off"),
        ({"last_exit": OOM, "down": True, "backoff": TEN_S}, "belongs to a server backing off"),
        ({"last_exit": OOM, "down": True, "running_since": NOW}, "has no run going"),
    ],
)
def test_impossible_restart_reports_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerRestarts(**fields)


ENDS = st.sampled_from(
    [OOM, ServerExit.exited(1, ENDED), ServerExit.killed(15, "SIGTERM", NOW), None]
)


@st.composite
def reports(draw: st.DrawFn) -> ServerRestarts:
    ended = draw(ENDS)
    if ended is None:
        return ServerRestarts(count=draw(st.integers(0, 5)))
    down = draw(st.booleans())
    backing_off = down and draw(st.booleans())
    return ServerRestarts(
        count=draw(st.integers(0, 5)),
        last_exit=ended,
        ran_for=draw(st.sampled_from([None, timedelta(seconds=3), timedelta(hours=1)])),
        down=down,
        backing_off=backing_off,
        backoff=draw(st.sampled_from([None, TEN_S])) if backing_off else None,
        running_since=None if down else draw(st.sampled_from([None, NOW])),
    )


@given(
    state=st.sampled_from(sorted(LIVE)),
    kind=st.sampled_from([SERVICE, BATCH]),
    phase=st.sampled_from(PHASES),
    seen=reports(),
    later=st.integers(0, 600),
)
def test_recording_what_the_pod_says_keeps_the_card_and_settles_at_once(
    state: WorkloadState, kind: WorkloadKind, phase: ServerPhase, seen: ServerRestarts, later: int
) -> None:
    """Whatever the Pod says, the card stays reserved, and saying it again changes nothing
    (the controller never writes in a loop)."""
    if (state is S.SERVING and kind is BATCH) or (state is S.RUNNING and kind is SERVICE):
        return
    if state is S.RECOVERING and kind is BATCH:
        return  # batch jobs do not recover
    fields: dict[str, Any] = {"kind": kind, "state": state}
    if state is S.RECOVERING:
        fields.update(
            recovery_mode=RecoveryMode.AUTOMATIC,
            recoveries=1,
            last_recovery=Recovery(
                from_machine="m2",
                to_machine="m1",
                at=UP_AT,
                unreachable_since=UP_AT - timedelta(minutes=3),
                after=timedelta(minutes=3),
            ),
        )
    if state is S.RESTARTING:
        fields.update(last_exit=ServerExit.exited(2, UP_AT), next_attempt=UP_AT + TEN_S)
    w = serving(**fields)
    after = restarted_in_place(w, phase, seen, None, NOW)
    if after is None:
        return
    assert holds_gpu(after.state)
    assert (after.machine, after.gpu_uuid) == (w.machine, w.gpu_uuid)
    assert restarted_in_place(after, phase, seen, None, NOW + timedelta(seconds=later)) is None


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


def test_a_servers_phase_moves_nothing_while_its_machine_is_unreachable() -> None:
    admitted = record(state=S.ADMITTED)
    assert server_moved(admitted, ServerPhase.ABSENT, LATER, Health.UNREACHABLE) is admitted
    assert server_moved(admitted, ServerPhase.ABSENT, LATER, Health.REPORTING) == with_state(
        admitted, S.STARTING, LATER
    )
