"""What a connected fleet answers each operation the cloud sends (domain/cloud.py), every
decision written out whole, and a machine's report refused field by field when it holds
something that is not a plain value."""

from __future__ import annotations

import re

import pytest

from nodeau.domain.cloud import (
    OperationDecision,
    OperationKind,
    RemoteOperation,
    Verdict,
    decide_operation,
    machine_entry,
)

K = OperationKind


def operation(kind: str, target: str = "m1") -> RemoteOperation:
    return RemoteOperation(id="op-1", kind=kind, target=target)


def test_an_unknown_operation_is_refused_naming_every_kind() -> None:
    op = operation("reboot")
    assert decide_operation(op, frozenset(K)) == OperationDecision(
        operation=op,
        verdict=Verdict.UNKNOWN,
        kind=None,
        sentence="refused 'reboot': Nodeau Cloud can only ask for drain, undrain, stop-batch, "
        "stop-service; nothing was run",
    )


@pytest.mark.parametrize(
    ("allowed", "chosen"),
    [(frozenset({K.STOP_BATCH, K.DRAIN}), "drain, stop-batch"), (frozenset(), "none")],
)
def test_an_operation_not_allowed_at_connect_is_refused_naming_what_was(
    allowed: frozenset[OperationKind], chosen: str
) -> None:
    op = operation("stop-service", "chat")
    assert decide_operation(op, allowed) == OperationDecision(
        operation=op,
        verdict=Verdict.NOT_ALLOWED,
        kind=None,
        sentence=f"refused stop-service 'chat': not allowed when this fleet was connected "
        f"(allowed: {chosen}; reconnect with --allow to change it); nothing was run",
    )


def test_an_operation_on_a_malformed_name_is_refused() -> None:
    op = operation("drain", "-m1")
    assert decide_operation(op, frozenset({K.DRAIN})) == OperationDecision(
        operation=op,
        verdict=Verdict.BAD_TARGET,
        kind=None,
        sentence="refused drain '-m1': not a machine or workload name; nothing was run",
    )


def test_an_allowed_operation_runs_and_says_so() -> None:
    op = operation("drain")
    assert decide_operation(op, frozenset({K.DRAIN})) == OperationDecision(
        operation=op, verdict=Verdict.ALLOWED, kind=K.DRAIN, sentence="drain m1: allowed at connect"
    )


def test_a_machine_without_gpus_is_sent_with_none() -> None:
    assert machine_entry({"machine": "m1", "health": "reporting"}) == {
        "machine": "m1",
        "health": "reporting",
        "drained": None,
        "upgrading": None,
        "control_plane": None,
        "simulated": None,
        "gpus": [],
    }


@pytest.mark.parametrize(
    ("machine", "message"),
    [
        (
            {"machine": "m1", "health": ["reporting"]},
            "machine.health is not a plain value (list); it is not sent",
        ),
        ({"machine": "m1", "gpus": "GPU-1"}, "machine.gpus is not a list of GPUs; it is not sent"),
        (
            {"machine": "m1", "gpus": ["GPU-1"]},
            "machine.gpus holds something that is not a GPU; it is not sent",
        ),
        (
            {"machine": "m1", "gpus": [{"uuid": b"GPU-1"}]},
            "gpu.uuid is not a plain value (bytes); it is not sent",
        ),
    ],
)
def test_a_machine_holding_something_not_plain_is_not_sent(
    machine: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        machine_entry(machine)
