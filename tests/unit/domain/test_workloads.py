"""Workload states and the sentence ``nodeau ps`` prints: exact matrices and properties."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.health import clock_time
from nodeau.domain.workloads import (
    FINISHED,
    HELD_REASON_FITS,
    HeldReason,
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
    holds_gpu,
    next_clause,
    ps_sentence,
    short_age,
    short_gpu,
    workload_invariants,
)

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
        held(R.MODEL_FILES),
        HELD_AT,
        "held since 12:03:40 (1m): garage stopped answering and no other machine has a verified"
        " copy; Nodeau fetches a verified copy to a machine that could run it and moves it once"
        " that machine has checked every file",
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
        workload(
            state=S.RECOVERING,
            recovery_mode=AUTO,
            target_machine="attic",
            since=at("12:06:40"),
        ),
        at("12:07:00"),
        "recovering onto attic since 12:06:40 (20s): garage stopped answering;"
        " loading its model there, and its endpoint stays the same",
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
        (S.SUCCEEDED, False),
        (S.FAILED, False),
        (S.STOPPED, False),
    ],
)
def test_holds_gpu(state: WorkloadState, expected: bool) -> None:
    assert holds_gpu(state) is expected


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
RECOVERING_MESSAGE = "a recovering workload has a target_machine, and only a recovering one"


def test_defaults_wait_for_the_machine_after_three_minutes() -> None:
    w = workload()
    assert w.recovery_mode is NEVER
    assert w.recovery_after == timedelta(minutes=3)
    assert (w.held_reason, w.next_step, w.target_machine) == (None, None, None)


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
        ({"target_machine": "attic", "recovery_mode": AUTO}, RECOVERING_MESSAGE),
        (
            {"state": S.RECOVERING, "target_machine": "attic"},
            "only a workload set to recover automatically recovers",
        ),
        (
            {"state": S.RECOVERING, "target_machine": "garage", "recovery_mode": AUTO},
            "a workload recovers onto another machine",
        ),
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
    target = draw(names.filter(lambda n: n != machine)) if state is S.RECOVERING else None
    return Workload(
        name=draw(names),
        kind=kind,
        model="Qwen3.5 4B Q4_K_M",
        artifact_id="sha256:9f2c",
        machine=machine,
        gpu_uuid=draw(st.sampled_from([GPU, "GPU-9f", "sim-0"])),
        state=state,
        since=draw(moments),
        recovery_mode=mode,
        recovery_after=draw(st.integers(1, 3600).map(lambda s: timedelta(seconds=s))),
        held_reason=reason,
        next_step=draw(steps),
        target_machine=target,
    )


ages = st.integers(min_value=-60, max_value=10 * 86400).map(lambda s: timedelta(seconds=s))


@given(workloads(), ages)
def test_every_sentence_names_the_machine_and_the_since_time(w: Workload, age: timedelta) -> None:
    sentence = ps_sentence(w, w.since + age)
    assert sentence.startswith(f"{w.state.value} ")
    assert w.machine in sentence
    assert f" since {clock_time(w.since)} ({short_age(age)})" in sentence


@given(workloads(), ages)
def test_every_sentence_ends_with_what_happens_next(w: Workload, age: timedelta) -> None:
    sentence = ps_sentence(w, w.since + age)
    clause = next_clause(w)
    assert clause.strip()
    assert sentence.endswith(f"; {clause}")
    if w.next_step is not None:
        assert clause == w.next_step


@given(workloads(), ages)
def test_held_and_recovering_say_what_stopped_and_where(w: Workload, age: timedelta) -> None:
    sentence = ps_sentence(w, w.since + age)
    if w.state in (S.HELD, S.RECOVERING):
        assert f"): {w.machine} stopped answering" in sentence
    else:
        assert f" on {w.machine} ({short_gpu(w.gpu_uuid)}) since " in sentence
    if w.state is S.RECOVERING:
        assert sentence.startswith(f"recovering onto {w.target_machine} since ")
    if w.held_reason is R.WAITING_FOR_DELAY and w.next_step is None:
        assert f"at {clock_time(w.since + w.recovery_after)} onto another machine" in sentence


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
