"""Nodeau Cloud's decisions: what may leave (an allow-list), which operations run, sign-in
polling, the schedule, the totals of calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.cloud import (
    GPU_FIELDS,
    MACHINE_FIELDS,
    SLOW_DOWN,
    WORKLOAD_FIELDS,
    CallPurpose,
    OperationKind,
    OutboundCall,
    RemoteOperation,
    SignInState,
    Verdict,
    call_totals,
    decide_operation,
    due,
    metadata_report,
    next_due,
    next_interval,
    parse_allowed,
    sign_in_ended,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ALL = frozenset(OperationKind)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("", frozenset()),
        ("drain", {OperationKind.DRAIN}),
        ("stop-batch,drain", {OperationKind.STOP_BATCH, OperationKind.DRAIN}),
        (" undrain , stop-service ,", {OperationKind.UNDRAIN, OperationKind.STOP_SERVICE}),
        ("drain,drain", {OperationKind.DRAIN}),
        ("stop-batch,,drain", {OperationKind.STOP_BATCH, OperationKind.DRAIN}),
    ],
)
def test_allowed_operations_are_read_from_the_option(text: str, kinds: set[OperationKind]) -> None:
    assert parse_allowed(text) == Success(frozenset(kinds))


@pytest.mark.parametrize("word", ["shell", "run", "DRAIN", "stop", "install-plan", "exec"])
def test_an_unknown_operation_is_refused_naming_the_choices(word: str) -> None:
    result = parse_allowed(f"drain,{word}")
    assert isinstance(result, Failure)
    assert result.failure() == (
        f"--allow: {word!r} is not an operation; choose from drain, undrain, stop-batch,"
        " stop-service"
    )


def op(kind: str, target: str = "gpu-box-1") -> RemoteOperation:
    return RemoteOperation(id="op-1", kind=kind, target=target)


@pytest.mark.parametrize(
    ("kind", "allowed", "verdict"),
    [
        ("drain", {OperationKind.DRAIN}, Verdict.ALLOWED),
        ("undrain", {OperationKind.UNDRAIN}, Verdict.ALLOWED),
        ("stop-batch", {OperationKind.STOP_BATCH}, Verdict.ALLOWED),
        ("stop-service", {OperationKind.STOP_SERVICE}, Verdict.ALLOWED),
        ("drain", {OperationKind.STOP_BATCH}, Verdict.NOT_ALLOWED),
        ("stop-service", set(), Verdict.NOT_ALLOWED),
        ("shell", set(OperationKind), Verdict.UNKNOWN),
        ("run", set(OperationKind), Verdict.UNKNOWN),
        ("", set(OperationKind), Verdict.UNKNOWN),
    ],
)
def test_only_an_operation_the_person_allowed_runs(
    kind: str, allowed: set[OperationKind], verdict: Verdict
) -> None:
    decision = decide_operation(op(kind), frozenset(allowed))
    assert decision.verdict is verdict
    assert decision.allowed is (verdict is Verdict.ALLOWED)
    assert (decision.kind is not None) is decision.allowed
    if not decision.allowed:
        assert decision.sentence.endswith("nothing was run")


def test_a_refusal_says_what_was_allowed_and_how_to_change_it() -> None:
    decision = decide_operation(op("drain"), frozenset({OperationKind.STOP_BATCH}))
    assert decision.sentence == (
        "refused drain 'gpu-box-1': not allowed when this fleet was connected (allowed:"
        " stop-batch; reconnect with --allow to change it); nothing was run"
    )


@pytest.mark.parametrize("target", ["", "a b", "-x", "x;rm -rf /", "../etc", "a" * 300, "é"])
def test_a_target_that_is_not_a_name_is_refused_even_when_allowed(target: str) -> None:
    assert decide_operation(op("drain", target), ALL).verdict is Verdict.BAD_TARGET


@given(kind=st.text(max_size=20), target=st.text(max_size=30))
def test_nothing_outside_the_list_is_ever_allowed(kind: str, target: str) -> None:
    decision = decide_operation(RemoteOperation(id="x", kind=kind, target=target), ALL)
    if decision.allowed:
        assert kind in {k.value for k in OperationKind}
    assert not decide_operation(
        RemoteOperation(id="x", kind=kind, target=target), frozenset()
    ).allowed


MACHINE = {
    "machine": "gpu-box-1",
    "health": "ready",
    "health_sentence": "both signals fresh",
    "drained": False,
    "upgrading": False,
    "control_plane": True,
    "policy": "pack",
    "policy_from": "the fleet policy",
    "simulated": True,
    "reported_at": T0,
    "gpus": [
        {
            "uuid": "GPU-1",
            "model": "NVIDIA H100",
            "total_bytes": 80,
            "held_by": "chat",
            "reserved_bytes": 10,
        }
    ],
}
WORKLOAD = {
    "name": "chat",
    "kind": "service",
    "model": "smollm2",
    "machine": "gpu-box-1",
    "gpu": "GPU-1",
    "simulated": True,
    "state": "serving",
    "since": T0,
    "endpoint": "http://127.0.0.1:4000/v1",
    "sentence": "serving on gpu-box-1",
}


def test_a_report_carries_exactly_the_allow_listed_fields() -> None:
    report = metadata_report("inst-1", [MACHINE], [WORKLOAD], T0)
    assert report == {
        "installation": "inst-1",
        "at": "2026-12-01T12:00:00+00:00",
        "machines": [
            {
                "machine": "gpu-box-1",
                "health": "ready",
                "drained": False,
                "upgrading": False,
                "control_plane": True,
                "simulated": True,
                "gpus": [
                    {
                        "uuid": "GPU-1",
                        "model": "NVIDIA H100",
                        "total_bytes": 80,
                        "held_by": "chat",
                        "reserved_bytes": 10,
                    }
                ],
            }
        ],
        "workloads": [
            {
                "name": "chat",
                "kind": "service",
                "model": "smollm2",
                "machine": "gpu-box-1",
                "gpu": "GPU-1",
                "simulated": True,
                "state": "serving",
                "since": "2026-12-01T12:00:00+00:00",
            }
        ],
    }


EXTRA = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(
        lambda k: k not in {*MACHINE_FIELDS, *GPU_FIELDS, *WORKLOAD_FIELDS, "gpus"}
    ),
    st.text(max_size=40),
    max_size=5,
)


@given(machine_extra=EXTRA, gpu_extra=EXTRA, workload_extra=EXTRA)
def test_a_field_not_on_the_list_never_leaves(
    machine_extra: dict[str, str], gpu_extra: dict[str, str], workload_extra: dict[str, str]
) -> None:
    machine = {**MACHINE, **machine_extra, "gpus": [{**MACHINE["gpus"][0], **gpu_extra}]}  # type: ignore[index, dict-item]
    workload = {**WORKLOAD, **workload_extra, "prompt": "secret", "completion": "secret"}
    report = metadata_report("inst-1", [machine], [workload], T0)
    [m] = report["machines"]  # type: ignore[misc]
    [w] = report["workloads"]  # type: ignore[misc]
    assert set(m) == {*MACHINE_FIELDS, "gpus"}
    assert set(m["gpus"][0]) == set(GPU_FIELDS)
    assert set(w) == set(WORKLOAD_FIELDS)
    assert "secret" not in repr(report)


@pytest.mark.parametrize(
    "value", [b"bytes", [1, 2], {"nested": "dict"}, (0.1, 0.2), object(), {1, 2}]
)
def test_an_allow_listed_field_that_is_not_a_plain_value_is_never_sent(value: object) -> None:
    with pytest.raises(ValueError, match=r"workload\.state is not a plain value"):
        metadata_report("inst-1", [], [{**WORKLOAD, "state": value}], T0)
    with pytest.raises(ValueError, match="is not a list of GPUs"):
        metadata_report("inst-1", [{**MACHINE, "gpus": "GPU-1"}], [], T0)
    gpu = {**MACHINE["gpus"][0], "model": value}  # type: ignore[index, dict-item]
    with pytest.raises(ValueError, match=r"gpu\.model is not a plain value"):
        metadata_report("inst-1", [{**MACHINE, "gpus": [gpu]}], [], T0)
    with pytest.raises(ValueError, match="holds something that is not a GPU"):
        metadata_report("inst-1", [{**MACHINE, "gpus": ["GPU-1"]}], [], T0)


def test_sign_in_polls_slow_down_by_five_seconds_and_ends_on_a_refusal() -> None:
    five = timedelta(seconds=5)
    assert next_interval(SignInState.PENDING, five) == five
    assert next_interval(SignInState.SLOW_DOWN, five) == five + SLOW_DOWN
    assert sign_in_ended(SignInState.PENDING) is None
    assert sign_in_ended(SignInState.SLOW_DOWN) is None
    assert sign_in_ended(SignInState.DENIED) == "the sign-in was declined in the browser"
    assert sign_in_ended(SignInState.EXPIRED) == "the code expired before it was approved"


def test_a_call_is_due_once_its_interval_has_passed_since_it_was_tried() -> None:
    every = timedelta(seconds=30)
    assert due(None, every, T0)
    assert not due(T0, every, T0 + timedelta(seconds=29))
    assert due(T0, every, T0 + every)
    assert next_due(None, every, T0) == T0
    assert next_due(T0, every, T0 + timedelta(seconds=1)) == T0 + every
    assert next_due(T0, every, T0 + timedelta(minutes=5)) == T0 + timedelta(minutes=5)


def call(at: datetime, sent: int, received: int, failure: str | None) -> OutboundCall:
    return OutboundCall(
        at=at,
        method="POST",
        url="https://api.nodeau.ai/v1/x",
        purpose=CallPurpose.REPORT,
        bytes_sent=sent,
        bytes_received=received,
        status=None if failure else 204,
        failure=failure,
    )


def test_totals_count_every_call_and_every_byte() -> None:
    calls = [
        call(T0, 100, 0, None),
        call(T0 + timedelta(seconds=1), 50, 10, "answered 500"),
        call(T0 + timedelta(seconds=2), 7, 3, None),
    ]
    totals = call_totals(calls)
    assert (totals.calls, totals.failed) == (3, 1)
    assert (totals.bytes_sent, totals.bytes_received) == (157, 13)
    assert totals.last_ok == T0 + timedelta(seconds=2)
    assert totals.last_failed == T0 + timedelta(seconds=1)
    empty = call_totals([])
    assert (empty.calls, empty.last_ok, empty.last_failed) == (0, None, None)
