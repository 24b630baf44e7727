"""A workload's next state from its model server's phase and its machine's health: the matrix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.health import Health
from nodeau.domain.lifecycle import ServerPhase, needs_server, next_state, with_state
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import HeldReason, RecoveryMode, Workload, WorkloadKind, WorkloadState

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
    S.RECOVERING: NOTHING,
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
    S.RECOVERING: (False, False),
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


SINCE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = SINCE + timedelta(minutes=5)


def record(**workload: object) -> WorkloadRecord:
    fields: dict[str, object] = {
        "name": "chat",
        "kind": SERVICE,
        "model": "qwen",
        "artifact_id": "ab" * 32,
        "machine": "m1",
        "gpu_uuid": "GPU-1",
        "state": S.SERVING,
        "since": SINCE,
        **workload,
    }
    return WorkloadRecord(
        workload=Workload(**fields),  # type: ignore[arg-type]
        config=RuntimeConfig(task=Task.CHAT, context_tokens=4096),
        model_path="/models/qwen.gguf",
    )


def test_with_state_moves_the_state_and_its_since_and_keeps_the_rest() -> None:
    before = record()
    after = with_state(before, S.STOPPED, LATER)
    assert (after.workload.state, after.workload.since) == (S.STOPPED, LATER)
    assert (after.workload.machine, after.workload.gpu_uuid) == ("m1", "GPU-1")
    assert (after.config, after.model_path) == (before.config, before.model_path)


def test_with_state_drops_what_belonged_to_held_and_recovering() -> None:
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
    moving = record(state=S.RECOVERING, recovery_mode=RecoveryMode.AUTOMATIC, target_machine="m2")
    failed = with_state(moving, S.FAILED, LATER)
    assert (failed.workload.state, failed.workload.target_machine) == (S.FAILED, None)


def test_with_state_refuses_a_state_the_workload_cannot_be_in() -> None:
    with pytest.raises(ValueError, match="only a batch job runs"):
        with_state(record(), S.RUNNING, LATER)
