"""Workload states and the sentence ``nodeau ps`` prints: exact matrices and properties."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.workloads import (
    FINISHED,
    HELD_REASON_FITS,
    ExitKind,
    HeldReason,
    Recovery,
    RecoveryMode,
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
    exit_words,
    holds_gpu,
    ps_sentence,
    short_age,
    short_gpu,
    start_interrupted,
    workload_invariants,
)
from tests.support.builders.lifecycle import OOM, UP_AT, serving

S = WorkloadState
R = HeldReason
SERVICE = WorkloadKind.SERVICE
BATCH = WorkloadKind.BATCH
AUTO = RecoveryMode.AUTOMATIC
NEVER = RecoveryMode.NEVER
GPU = "GPU-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def at(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(2025, 3, 1, h, m, s, tzinfo=UTC)


def moved(from_machine: str, to_machine: str, when: datetime) -> Recovery:
    """A recovery made at ``when``, its machine unreachable for the default delay before."""
    return Recovery(
        from_machine=from_machine,
        to_machine=to_machine,
        at=when,
        unreachable_since=when - timedelta(minutes=3),
        after=timedelta(minutes=3),
    )


def workload(**changes: Any) -> Workload:
    fields: dict[str, Any] = {
        "name": "qwen-local",
        "kind": SERVICE,
        "model": "Qwen3.5 4B Q4_K_M",
        "artifact_id": "sha256:9f2c",
        "machine": "garage",
        "gpu_uuid": GPU,
        "state": S.SERVING,
        "since": at("12:00:05"),
    }
    fields.update(changes)
    return Workload(**fields)


def held(reason: HeldReason, **changes: Any) -> Workload:
    kind, mode = HELD_REASON_FITS[reason]
    base = {"state": S.HELD, "held_reason": reason, "kind": kind, "recovery_mode": mode}
    base["since"] = at("12:03:40")
    base.update(changes)
    return workload(**base)


def restarting(ended: ServerExit, **changes: Any) -> Workload:
    base: dict[str, Any] = {
        "state": S.RESTARTING,
        "since": ended.at,
        "last_exit": ended,
        "next_attempt": ended.at + timedelta(seconds=10),
        "crash_streak": 1,
    }
    base.update(changes)
    return workload(**base)


KILLED = ServerExit.killed(9, "SIGKILL", at("12:03:40"))
RUNNING_AT = at("12:04:05")  # 4m after 12:00:05
HELD_AT = at("12:04:40")  # 1m after 12:03:40

# ---------------------------------------------------------------- the sentence matrix

SENTENCES: list[tuple[Workload, datetime, str]] = [
    (
        workload(state=S.ADMITTED),
        RUNNING_AT,
        "admitted on garage (GPU-1a2b…) since 12:00:05 (4m);"
        " it starts once its image and model files are ready",
    ),
    (
        workload(state=S.STARTING),
        RUNNING_AT,
        "starting on garage (GPU-1a2b…) since 12:00:05 (4m); it serves once its model has loaded",
    ),
    (
        workload(state=S.STARTING, kind=BATCH),
        RUNNING_AT,
        "starting on garage (GPU-1a2b…) since 12:00:05 (4m); it runs once its model has loaded",
    ),
    (
        workload(state=S.SERVING),
        RUNNING_AT,
        "serving on garage (GPU-1a2b…) since 12:00:05 (4m); nothing to do",
    ),
    (
        workload(state=S.RUNNING, kind=BATCH),
        RUNNING_AT,
        "running on garage (GPU-1a2b…) since 12:00:05 (4m);"
        " it finishes when its last request is done",
    ),
    (
        workload(state=S.SUCCEEDED, kind=BATCH),
        RUNNING_AT,
        "succeeded on garage (GPU-1a2b…) since 12:00:05 (4m); its card is free",
    ),
    (
        workload(state=S.FAILED),
        RUNNING_AT,
        "failed on garage (GPU-1a2b…) since 12:00:05 (4m); its card is free",
    ),
    (
        workload(state=S.STOPPED),
        RUNNING_AT,
        "stopped on garage (GPU-1a2b…) since 12:00:05 (4m); its card is free",
    ),
    (
        held(R.MACHINE_UNREACHABLE_RECOVERY_OFF),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering;"
        " recovery is off, so it waits for garage",
    ),
    (
        held(R.WAITING_FOR_DELAY),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering;"
        " recovers automatically at 12:06:40 onto another machine",
    ),
    (
        held(R.WAITING_FOR_DELAY, recovery_after=timedelta(minutes=10)),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering;"
        " recovers automatically at 12:13:40 onto another machine",
    ),
    (
        held(R.ON_CONTROL_PLANE_MACHINE),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering;"
        " garage is the control-plane machine, so it waits for garage",
    ),
    (
        held(R.BATCH_JOB),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering;"
        " batch jobs do not recover, it waits for garage",
    ),
    (
        held(R.FLEET_QUIET),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering, with most of the fleet; nothing"
        " moves while more than half of the fleet is quiet at once (Nodeau suspects the"
        " network or itself, not the machines)",
    ),
    (
        held(R.MODEL_FILES),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering and no other machine has a verified"
        " copy; a machine that could run it fetches a verified copy (a model you imported:"
        " import it there), and it moves once that machine has checked every file",
    ),
    (
        held(
            R.MODEL_FILES,
            next_step="fetching a verified copy to attic; moves once attic has checked every file",
        ),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering and no other machine has a verified"
        " copy; fetching a verified copy to attic; moves once attic has checked every file",
    ),
    (
        held(R.CAPACITY),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering and no other machine has a free card"
        " that fits; it starts when one frees (no retries)",
    ),
    (
        held(R.LIMITS),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering and the organisation's limits or"
        " the plan stand in the way; it moves once the organisation's limits or the plan let it"
        " run on a machine that can take it (nodeau plan explain says which; no retries until"
        " then)",
    ),
    (
        workload(
            state=S.RECOVERING,
            recovery_mode=AUTO,
            machine="attic",
            recoveries=1,
            last_recovery=moved("garage", "attic", at("12:06:40")),
            since=at("12:06:40"),
        ),
        at("12:07:00"),
        f"recovering on attic ({GPU[:8]}…) since 12:06:40 (20s): garage stopped answering;"
        " loading its model there, and its endpoint stays the same",
    ),
    (
        restarting(KILLED),
        at("12:03:44"),
        "restarting on garage (GPU-1a2b…) since 12:03:40 (4s): its model server was killed by"
        " signal 9 (SIGKILL) at 12:03:40; restart 1, next attempt at 12:03:50",
    ),
    (
        restarting(KILLED, kind=BATCH),
        at("12:03:44"),
        "restarting on garage (GPU-1a2b…) since 12:03:40 (4s): its model server was killed by"
        " signal 9 (SIGKILL) at 12:03:40; restart 1, next attempt at 12:03:50",
    ),
    (
        restarting(
            ServerExit.exited(1, at("12:04:10"), starting=True),
            since=at("12:03:40"),
            restarts=1,
            crash_streak=2,
            next_attempt=at("12:04:30"),
        ),
        at("12:04:12"),
        "restarting on garage (GPU-1a2b…) since 12:03:40 (32s): its model server exited with"
        " code 1 while starting at 12:04:10; restart 2, next attempt at 12:04:30"
        " (nodeau logs qwen-local shows its log)",
    ),
    (
        restarting(ServerExit.unknown(at("12:03:40"))),
        at("12:03:41"),
        "restarting on garage (GPU-1a2b…) since 12:03:40 (1s): its model server's process was"
        " found gone at 12:03:40 (exit status unknown); restart 1, next attempt at 12:03:50",
    ),
    (
        workload(state=S.EXITED, last_exit=KILLED, since=at("12:03:40")),
        at("12:03:41"),
        "exited on garage (GPU-1a2b…) since 12:03:40 (1s): its model server was killed by"
        " signal 9 (SIGKILL) at 12:03:40; its endpoint restarts it if it runs; if not,"
        " nodeau run qwen-local starts the endpoint again",
    ),
    (
        workload(state=S.EXITED, kind=BATCH, last_exit=KILLED, since=at("12:03:40")),
        at("12:03:41"),
        "exited on garage (GPU-1a2b…) since 12:03:40 (1s): its model server was killed by"
        " signal 9 (SIGKILL) at 12:03:40; its batch worker restarts it if it runs; if not,"
        " nodeau batch stop qwen-local frees the card",
    ),
    (
        workload(state=S.SERVING, since=at("12:03:50"), restarts=1, last_exit=KILLED),
        RUNNING_AT,
        "serving on garage (GPU-1a2b…) since 12:03:50 (15s), restarted once after its model"
        " server was killed by signal 9 (SIGKILL) at 12:03:40; nothing to do",
    ),
    (
        workload(
            state=S.RUNNING,
            kind=BATCH,
            since=at("12:03:50"),
            restarts=3,
            last_exit=ServerExit.exited(139, at("12:03:20")),
        ),
        RUNNING_AT,
        "running on garage (GPU-1a2b…) since 12:03:50 (15s), restarted 3 times, last after its"
        " model server exited with code 139 at 12:03:20; it finishes when its last request is"
        " done",
    ),
    (
        workload(state=S.SERVING, next_step="stops at 13:00:00 by its schedule"),
        RUNNING_AT,
        "serving on garage (GPU-1a2b…) since 12:00:05 (4m); stops at 13:00:00 by its schedule",
    ),
    (
        workload(state=S.SERVING, machine="attic", gpu_uuid="GPU-9f", since=at("23:59:59")),
        datetime(2025, 3, 2, 1, 0, 0, tzinfo=UTC),
        "serving on attic (GPU-9f) since 23:59:59 (1h); nothing to do",
    ),
]


@pytest.mark.parametrize(("w", "now", "sentence"), SENTENCES)
def test_ps_sentence_matrix(w: Workload, now: datetime, sentence: str) -> None:
    assert ps_sentence(w, now) == sentence


def test_the_matrix_covers_every_state_and_every_held_reason() -> None:
    assert {w.state for w, _, _ in SENTENCES} == set(WorkloadState)
    assert {w.held_reason for w, _, _ in SENTENCES} - {None} == set(HeldReason)


def test_ps_sentence_prints_utc_and_refuses_a_naive_now() -> None:
    plus_two = timezone(timedelta(hours=2))
    w = workload(since=datetime(2025, 3, 1, 14, 0, 5, tzinfo=plus_two))
    assert ps_sentence(w, RUNNING_AT) == (
        "serving on garage (GPU-1a2b…) since 12:00:05 (4m); nothing to do"
    )
    with pytest.raises(
        ValueError, match=exactly("now must carry a timezone, got 2025-03-01T12:04:05")
    ):
        ps_sentence(w, datetime(2025, 3, 1, 12, 4, 5))


def test_a_since_after_now_prints_a_zero_age() -> None:
    assert ps_sentence(workload(), at("12:00:00")) == (
        "serving on garage (GPU-1a2b…) since 12:00:05 (0s); nothing to do"
    )


# ---------------------------------------------------------------- reservations


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (S.ADMITTED, True),
        (S.STARTING, True),
        (S.SERVING, True),
        (S.RUNNING, True),
        (S.HELD, True),
        (S.RECOVERING, True),
        (S.RESTARTING, True),
        (S.EXITED, True),
        (S.SUCCEEDED, False),
        (S.FAILED, False),
        (S.STOPPED, False),
    ],
)
def test_holds_gpu(state: WorkloadState, expected: bool) -> None:
    assert holds_gpu(state) is expected


# ---------------------------------------------------------------- how a server ended

EXIT_WORDS = [
    (ServerExit.exited(0, at("12:00:01")), "its model server exited with code 0 at 12:00:01"),
    (
        ServerExit.exited(1, at("12:00:01"), starting=True),
        "its model server exited with code 1 while starting at 12:00:01",
    ),
    (
        ServerExit.killed(11, "SIGSEGV", at("12:00:01")),
        "its model server was killed by signal 11 (SIGSEGV) at 12:00:01",
    ),
    (
        ServerExit.killed(64, None, at("12:00:01")),
        "its model server was killed by signal 64 at 12:00:01",
    ),
    (
        ServerExit.unknown(at("12:00:01")),
        "its model server's process was found gone at 12:00:01 (exit status unknown)",
    ),
    (
        ServerExit.not_ready(120.0, at("12:02:01")),
        "its model server was not ready within 120 s of starting and was stopped at 12:02:01",
    ),
    (
        ServerExit.not_started("/m.gguf: no such model file", at("12:00:01")),
        "its model server could not be started at 12:00:01 (/m.gguf: no such model file)",
    ),
]


@pytest.mark.parametrize(("ended", "words"), EXIT_WORDS)
def test_exit_words(ended: ServerExit, words: str) -> None:
    assert exit_words(ended) == words


def test_the_exit_words_cover_every_kind() -> None:
    assert {e.kind for e, _ in EXIT_WORDS} == set(ExitKind)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": ExitKind.EXITED}, "an exit of kind exited has its detail, and only it"),
        (
            {"kind": ExitKind.KILLED, "code": 1},
            "an exit of kind exited has its detail, and only it",
        ),
        ({"kind": ExitKind.KILLED}, "an exit of kind killed has its detail, and only it"),
        ({"kind": ExitKind.NOT_READY}, "an exit of kind not-ready has its detail, and only it"),
        ({"kind": ExitKind.NOT_STARTED}, "an exit of kind not-started has its detail, and only it"),
        ({"kind": ExitKind.KILLED, "signal": 0}, "a signal's number is positive, got 0"),
        ({"kind": ExitKind.UNKNOWN, "signal_name": "SIGKILL"}, "a signal name belongs to a kill"),
        (
            {"kind": ExitKind.UNKNOWN, "at": datetime(2025, 3, 1)},
            "an exit's time must carry a timezone, got 2025-03-01T00:00:00",
        ),
    ],
)
def test_impossible_exits_are_refused(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"at": at("12:00:00"), **changes}
    with pytest.raises(ValueError, match=exactly(message)):
        ServerExit(**fields)


def test_finished_states_are_exactly_the_three() -> None:
    assert frozenset({S.SUCCEEDED, S.FAILED, S.STOPPED}) == FINISHED


# ---------------------------------------------------------------- short forms


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (timedelta(seconds=-5), "0s"),
        (timedelta(0), "0s"),
        (timedelta(seconds=59, microseconds=999_999), "59s"),
        (timedelta(seconds=60), "1m"),
        (timedelta(seconds=3599), "59m"),
        (timedelta(hours=1), "1h"),
        (timedelta(seconds=86399), "23h"),
        (timedelta(days=1), "1d"),
        (timedelta(days=3, hours=23), "3d"),
    ],
)
def test_short_age(age: timedelta, expected: str) -> None:
    assert short_age(age) == expected


@pytest.mark.parametrize(
    ("uuid", "expected"),
    [
        (GPU, "GPU-1a2b…"),
        ("GPU-1a2b", "GPU-1a2b"),
        ("GPU-1a2b3", "GPU-1a2b…"),
        ("sim-0", "sim-0"),
    ],
)
def test_short_gpu(uuid: str, expected: str) -> None:
    assert short_gpu(uuid) == expected


# ---------------------------------------------------------------- invariants

HELD_MESSAGE = "a held workload has a held_reason, and only a held one"
RECOVERING_MESSAGE = "a recovering workload has a last recovery onto its machine"
RECOVERIES_MESSAGE = "a workload that recovered has its last recovery, and only one"


def test_defaults_wait_for_the_machine_after_three_minutes() -> None:
    w = workload()
    assert w.recovery_mode is NEVER
    assert w.recovery_after == timedelta(minutes=3)
    assert (w.held_reason, w.next_step, w.last_recovery, w.recoveries) == (None, None, None, 0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": " "}, "a workload needs a name"),
        ({"machine": ""}, "a workload needs a machine"),
        ({"gpu_uuid": "\t"}, "a workload needs a gpu_uuid"),
        (
            {"since": datetime(2025, 3, 1, 12, 0)},
            "since must carry a timezone, got 2025-03-01T12:00:00",
        ),
        ({"recovery_after": timedelta(0)}, "recovery_after must be positive, got 0:00:00"),
        (
            {"recovery_after": timedelta(seconds=-1)},
            "recovery_after must be positive, got -1 day, 23:59:59",
        ),
        ({"next_step": "  "}, "next_step, when given, says something"),
        ({"kind": BATCH}, "only a service serves"),
        ({"state": S.RUNNING}, "only a batch job runs"),
        (
            {"state": S.ADMITTED, "kind": BATCH, "recovery_mode": AUTO},
            "recovery applies to served workloads, not batch jobs",
        ),
        ({"state": S.HELD}, HELD_MESSAGE),
        ({"held_reason": R.CAPACITY, "recovery_mode": AUTO}, HELD_MESSAGE),
        (
            {"state": S.HELD, "held_reason": R.CAPACITY},
            "held reason capacity needs a service set to automatic",
        ),
        (
            {
                "state": S.HELD,
                "held_reason": R.MACHINE_UNREACHABLE_RECOVERY_OFF,
                "recovery_mode": AUTO,
            },
            "held reason machine-unreachable-recovery-off needs a service set to never",
        ),
        (
            {"state": S.HELD, "held_reason": R.BATCH_JOB},
            "held reason batch-job needs a batch set to never",
        ),
        (
            {"state": S.HELD, "held_reason": R.WAITING_FOR_DELAY, "kind": BATCH},
            "held reason waiting-for-delay needs a service set to automatic",
        ),
        ({"state": S.RECOVERING, "recovery_mode": AUTO}, RECOVERING_MESSAGE),
        (
            {
                "state": S.RECOVERING,
                "recovery_mode": AUTO,
                "recoveries": 1,
                "last_recovery": moved("garage", "attic", at("12:06:40")),
            },
            RECOVERING_MESSAGE,
        ),
        ({"last_recovery": moved("attic", "garage", at("12:06:40"))}, RECOVERIES_MESSAGE),
        ({"recoveries": 2}, RECOVERIES_MESSAGE),
        ({"restarts": -1}, "restarts, crash_streak and recoveries count, from 0"),
        ({"crash_streak": -1}, "restarts, crash_streak and recoveries count, from 0"),
        (
            {"next_attempt": datetime(2025, 3, 1, 12, 0)},
            "next_attempt must carry a timezone, got 2025-03-01T12:00:00",
        ),
        (
            {"state": S.RESTARTING, "last_exit": KILLED},
            "a restarting workload has a last_exit and a next_attempt",
        ),
        (
            {"state": S.RESTARTING, "next_attempt": at("12:00:15")},
            "a restarting workload has a last_exit and a next_attempt",
        ),
        ({"state": S.EXITED}, "an exited workload has a last_exit"),
    ],
)
def test_impossible_workloads_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        workload(**changes)


@pytest.mark.parametrize("reason", list(HeldReason))
def test_every_held_reason_fits_its_kind_and_mode(reason: HeldReason) -> None:
    w = held(reason)
    workload_invariants(w)
    assert (w.kind, w.recovery_mode) == HELD_REASON_FITS[reason]


def test_held_reasons_belong_to_their_recovery_mode() -> None:
    assert HELD_REASON_FITS == {
        R.MACHINE_UNREACHABLE_RECOVERY_OFF: (SERVICE, NEVER),
        R.WAITING_FOR_DELAY: (SERVICE, AUTO),
        R.ON_CONTROL_PLANE_MACHINE: (SERVICE, AUTO),
        R.BATCH_JOB: (BATCH, NEVER),
        R.MODEL_FILES: (SERVICE, AUTO),
        R.CAPACITY: (SERVICE, AUTO),
        R.FLEET_QUIET: (SERVICE, AUTO),
        R.LIMITS: (SERVICE, AUTO),
    }


# ---------------------------------------------------------------- properties

names = st.from_regex(r"[a-z][a-z0-9-]{0,14}", fullmatch=True)
zones = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7))])
moments = st.datetimes(
    min_value=datetime(2001, 1, 1), max_value=datetime(2099, 1, 1), timezones=zones
)
steps = st.none() | st.from_regex(r"[a-z][a-z ,;]{0,40}[a-z]", fullmatch=True)


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    state = draw(st.sampled_from(WorkloadState))
    reason = draw(st.sampled_from(HeldReason)) if state is S.HELD else None
    kind = draw(st.sampled_from(WorkloadKind))
    mode = draw(st.sampled_from(RecoveryMode))
    if reason is not None:
        kind, mode = HELD_REASON_FITS[reason]
    elif state in (S.SERVING, S.RECOVERING):
        kind = SERVICE
    elif state is S.RUNNING:
        kind = BATCH
    if state is S.RECOVERING:
        mode = AUTO
    if kind is BATCH:
        mode = NEVER
    machine = draw(names)
    left = draw(names.filter(lambda n: n != machine))
    moves = draw(st.integers(1, 20)) if state is S.RECOVERING else draw(st.integers(0, 20))
    since = draw(moments)
    ended = draw(st.none() | exits(since)) if state not in (S.RESTARTING, S.EXITED) else None
    if state in (S.RESTARTING, S.EXITED):
        ended = draw(exits(since))
    attempt = None
    if state is S.RESTARTING:
        attempt = since + timedelta(seconds=draw(st.integers(1, 300)))
    return Workload(
        name=draw(names),
        kind=kind,
        model="Qwen3.5 4B Q4_K_M",
        artifact_id="sha256:9f2c",
        machine=machine,
        gpu_uuid=draw(st.sampled_from([GPU, "GPU-9f", "sim-0"])),
        state=state,
        since=since,
        recovery_mode=mode,
        recovery_after=draw(st.integers(1, 3600).map(lambda s: timedelta(seconds=s))),
        held_reason=reason,
        next_step=draw(steps),
        recoveries=moves,
        last_recovery=None if moves == 0 else moved(left, machine, since),
        restarts=draw(st.integers(0, 1000)),
        last_exit=ended,
        next_attempt=attempt,
        crash_streak=draw(st.integers(0, 100)),
    )


@st.composite
def exits(draw: st.DrawFn, near: datetime) -> ServerExit:
    when = near - timedelta(seconds=draw(st.integers(0, 600)))
    starting = draw(st.booleans())
    return draw(
        st.sampled_from(
            [
                ServerExit.exited(draw(st.integers(0, 255)), when, starting=starting),
                ServerExit.killed(
                    draw(st.integers(1, 64)),
                    draw(st.none() | st.sampled_from(["SIGKILL", "SIGSEGV"])),
                    when,
                    starting=starting,
                ),
                ServerExit.unknown(when),
                ServerExit.not_ready(draw(st.floats(0.001, 600)), when),
                ServerExit.not_started("no such model file", when),
            ]
        )
    )


ages = st.integers(min_value=-60, max_value=10 * 86400).map(lambda s: timedelta(seconds=s))


# The oracles of the properties below are written here, not taken from the module's own
# helpers (clock_time, short_age, short_gpu, next_clause): stdlib formatting, a parse back
# of the printed age, and the product's sentences written out.


def hms(at: datetime) -> str:
    """A moment as nodeau ps prints it: HH:MM:SS in UTC."""
    return f"{at.astimezone(UTC):%H:%M:%S}"


UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NEXT_BY_STATE = {  # what happens next, for a workload neither held, restarting nor exited
    (S.ADMITTED, WorkloadKind.SERVICE): "it starts once its image and model files are ready",
    (S.ADMITTED, WorkloadKind.BATCH): "it starts once its image and model files are ready",
    (S.STARTING, WorkloadKind.SERVICE): "it serves once its model has loaded",
    (S.STARTING, WorkloadKind.BATCH): "it runs once its model has loaded",
    (S.SERVING, WorkloadKind.SERVICE): "nothing to do",
    (S.RUNNING, WorkloadKind.BATCH): "it finishes when its last request is done",
    (S.RECOVERING, WorkloadKind.SERVICE): (
        "loading its model there, and its endpoint stays the same"
    ),
}


@given(workloads(), ages)
def test_every_sentence_names_the_machine_and_the_since_time(w: Workload, age: timedelta) -> None:
    sentence = ps_sentence(w, w.since + age)
    assert sentence.startswith(f"{w.state.value} ")
    assert w.machine in sentence
    printed = re.search(rf" since {hms(w.since)} \((\d+)([smhd])\)", sentence)
    assert printed is not None, sentence
    count, unit = int(printed.group(1)), printed.group(2)
    seconds = max(0, int(age.total_seconds()))  # a clock behind the record prints 0s
    size = UNIT_SECONDS[unit]
    assert count * size <= seconds < (count + 1) * size  # rounded down to its unit
    assert unit == "d" or seconds < {"s": 60, "m": 3600, "h": 86400}[unit]  # the largest unit


@given(workloads(), ages)
def test_every_sentence_ends_with_what_happens_next(w: Workload, age: timedelta) -> None:
    sentence = ps_sentence(w, w.since + age)
    last = sentence.rsplit("; ", 1)
    assert len(last) == 2 and last[1].strip(), sentence
    if w.next_step is not None:
        assert sentence.endswith(f"; {w.next_step}")
    elif w.state in FINISHED:
        assert sentence.endswith("; its card is free")
    elif w.held_reason is None and (w.state, w.kind) in NEXT_BY_STATE:
        assert sentence.endswith(f"; {NEXT_BY_STATE[w.state, w.kind]}")
    elif w.state is S.EXITED:
        assert sentence.endswith(" starts the endpoint again" if w.kind is WorkloadKind.SERVICE
                                 else " frees the card")  # fmt: skip


@given(workloads(), ages)
def test_held_and_recovering_say_what_stopped_and_where(w: Workload, age: timedelta) -> None:
    sentence = ps_sentence(w, w.since + age)
    if w.state is S.HELD:
        assert f"): {w.machine} stopped answering" in sentence
    else:
        shown = re.escape(w.gpu_uuid[:8])  # a card shown by its first 8 characters
        assert re.search(rf" on {re.escape(w.machine)} \({shown}(…)?\) since ", sentence)
    if w.state is S.RECOVERING:
        assert w.last_recovery is not None
        assert sentence.startswith(f"recovering on {w.machine} (")
        assert f"): {w.last_recovery.from_machine} stopped answering; " in sentence
    if w.held_reason is R.WAITING_FOR_DELAY and w.next_step is None:
        assert f"at {hms(w.since + w.recovery_after)} onto another machine" in sentence


@given(workloads(), ages)
def test_a_restarting_or_exited_workload_says_how_its_server_ended(
    w: Workload, age: timedelta
) -> None:
    sentence = ps_sentence(w, w.since + age)
    if w.state in (S.RESTARTING, S.EXITED):
        assert w.last_exit is not None
        assert f"): {exit_words(w.last_exit)}; " in sentence
    if w.state is S.RESTARTING and w.next_step is None:
        assert w.next_attempt is not None
        assert f"; restart {w.restarts + 1}, next attempt at {hms(w.next_attempt)}" in sentence
    up_again = w.state in (S.SERVING, S.RUNNING) and w.restarts > 0 and w.last_exit is not None
    assert (", restarted " in sentence) is up_again


@given(workloads())
def test_only_finished_workloads_free_their_card(w: Workload) -> None:
    assert holds_gpu(w.state) is (w.state not in FINISHED)
    if w.next_step is None:
        assert ps_sentence(w, w.since).endswith("; its card is free") is (w.state in FINISHED)


@given(st.integers(min_value=0, max_value=400 * 86400))
def test_short_age_rounds_down_to_its_largest_unit(seconds: int) -> None:
    text = short_age(timedelta(seconds=seconds))
    match = re.fullmatch(r"(\d+)([smhd])", text)
    assert match is not None
    size = {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    count = int(match.group(1))
    assert count * size <= seconds < (count + 1) * size
    assert count >= 1 or text == "0s"
    assert match.group(2) == "d" or count < {"s": 60, "m": 60, "h": 24}[match.group(2)]


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


def test_a_workload_run_on_the_cpu_says_its_model_is_on_the_cpu() -> None:
    on_cpu = serving(on_cpu=True)
    now = UP_AT + timedelta(minutes=4)
    assert ps_sentence(on_cpu, now) == (
        "serving on m1 (GPU-1, the model on the CPU) since 11:00:00 (4m); nothing to do"
    )
    assert ps_sentence(serving(), now) == "serving on m1 (GPU-1) since 11:00:00 (4m); nothing to do"


def test_an_interrupted_start_says_what_may_be_left_and_how_to_end_it() -> None:
    starting = serving(state=WorkloadState.STARTING)
    assert start_interrupted(starting, 4242) == evolve(
        starting,
        next_step="its start was interrupted (the nodeau run starting it ended); its model "
        "server (pid 4242) may still run: nodeau stop chat --workload ends it and frees the card",
    )
    assert start_interrupted(starting, None) == evolve(
        starting,
        next_step="its start was interrupted (the nodeau run starting it ended); no model "
        "server was recorded for it: nodeau stop chat --workload ends it and frees the card",
    )
