"""Serving use-cases on the one-machine plane: run, stop, and what ps and explain read.

``run_model`` decides before it creates anything: the model must be verified
here, the request goes through admission and placement inside one state
transaction, and a refusal records nothing. Only then is a model server
started; if it cannot start, the reservation is released and the workload is
recorded as failed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from attrs import evolve, frozen
from returns.pipeline import is_successful
from returns.result import Failure, Result, Success

from nodeau.apps.models import Resolved
from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.hardware import Fleet, Machine, MachineReading
from nodeau.domain.memory import Prediction, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.scheduling import FleetView, schedule
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import (
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
)
from nodeau.ports.runtime import ModelRuntime, RunningServer, RuntimeFailure, ServerSpec
from nodeau.ports.state import Admission, Snapshot, StateStore, WorkloadRecord

READY_TIMEOUT_S = 120.0


@frozen(kw_only=True)
class RunRequest:
    name: str
    task: Task
    context_tokens: int | None
    recovery: RecoveryMode
    recovery_after: timedelta


def fleet_of_one(reading: MachineReading) -> Fleet:
    """This machine as a fleet of one, from what its hardware reading says."""
    return Fleet(machines=(Machine(name=reading.machine, gpus=tuple(r.gpu for r in reading.gpus)),))


def scheduled_admission(
    request: AdmissionRequest,
    view: FleetView,
    *,
    kind: WorkloadKind,
    recovery: RecoveryMode,
    recovery_after: timedelta,
    model_path: Callable[[str], str],
    now: datetime,
) -> Result[Admission, Refusal]:
    """Admission and placement on ``view``, and the admitted workload's record on the card
    chosen (its model file as ``model_path(machine)`` gives it): what every plane records."""
    scheduled = schedule(request, view)
    if not is_successful(scheduled):
        return Failure(scheduled.failure())
    both = scheduled.unwrap()
    workload = Workload(
        name=request.workload,
        kind=kind,
        model=request.model,
        artifact_id=request.artifact_id,
        machine=both.placement.machine,
        gpu_uuid=both.placement.gpu_uuid,
        state=WorkloadState.ADMITTED,
        since=now,
        recovery_mode=recovery,
        recovery_after=recovery_after,
    )
    record = WorkloadRecord(
        workload=workload, config=request.config, model_path=model_path(workload.machine)
    )
    return Success(
        Admission(record=record, admitted=both.admitted, placement=both.placement, decided_at=now)
    )


def decide_run(
    *,
    request: RunRequest,
    resolved: Resolved,
    model_path: Path | None,
    config: RuntimeConfig,
    reading: MachineReading,
    predict: Callable[[str], Prediction],
    settings: SchedulingSettings,
    now: datetime,
) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    """The decision ``StateStore.admit`` runs on its snapshot, inside its transaction."""
    fleet = fleet_of_one(reading)
    verified_on = frozenset({reading.machine}) if model_path is not None else frozenset()
    admission_request = AdmissionRequest(
        workload=request.name,
        model=resolved.display_name,
        artifact_id=resolved.artifact.id.hex,
        config=config,
    )

    def decide(snapshot: Snapshot) -> Result[Admission, Refusal]:
        view = FleetView(
            fleet=fleet,
            ledger=snapshot.ledger,
            settings=settings,
            excluded=(),
            verified_on=verified_on,
            predict=predict,
        )
        return scheduled_admission(
            admission_request,
            view,
            kind=WorkloadKind.SERVICE,
            recovery=request.recovery,
            recovery_after=request.recovery_after,
            model_path=lambda _machine: str(model_path),
            now=now,
        )

    return decide


def no_verified_copy(name: str, machine: str) -> Refusal:
    return Refusal.of(
        ReasonCode.NO_VERIFIED_COPY,
        f"{name} has no verified copy on {machine}; pull or import it, then run it",
    )


def with_state(record: WorkloadRecord, state: WorkloadState, at: datetime) -> WorkloadRecord:
    """The record with its workload in ``state`` since ``at``."""
    return evolve(record, workload=evolve(record.workload, state=state, since=at))


def launch_server(
    admission: Admission,
    *,
    reading: MachineReading,
    runtime: ModelRuntime,
    state: StateStore,
    log_dir: Path,
    now: Callable[[], datetime],
) -> RunningServer:
    """Start the admitted workload's model server (starting, then up).

    If it cannot start, its card is freed and it is recorded failed before the
    RuntimeFailure goes on to the caller.
    """
    record = admission.record
    name = record.workload.name
    simulated = any(r.gpu.simulated for r in reading.gpus)
    spec = ServerSpec(
        name=name,
        model_path=Path(record.model_path),
        config=record.config,
        gpu_uuid=None if simulated else record.workload.gpu_uuid,
        log_path=log_dir / f"{name}.log",
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    state.update(name, lambda r: with_state(r, WorkloadState.STARTING, now()))
    try:
        return runtime.start(spec, READY_TIMEOUT_S)
    except RuntimeFailure:
        state.release(name, lambda r: with_state(r, WorkloadState.FAILED, now()))
        raise


def start_server(
    admission: Admission,
    *,
    reading: MachineReading,
    runtime: ModelRuntime,
    state: StateStore,
    log_dir: Path,
    now: Callable[[], datetime],
    endpoint_port: int,
) -> WorkloadRecord:
    """Start the admitted service's model server and record it serving (or failed)."""
    server = launch_server(
        admission, reading=reading, runtime=runtime, state=state, log_dir=log_dir, now=now
    )
    return serving(state, admission.record.workload.name, server, endpoint_port, now())


def serving(
    state: StateStore, name: str, server: RunningServer, endpoint_port: int, at: datetime
) -> WorkloadRecord:
    return state.update(
        name,
        lambda r: evolve(
            r,
            server=server,
            endpoint_port=r.endpoint_port or endpoint_port,
            workload=evolve(r.workload, state=WorkloadState.SERVING, since=at),
        ),
    )


def stop_workload(
    name: str, *, state: StateStore, runtime: ModelRuntime, now: Callable[[], datetime]
) -> WorkloadRecord:
    """Stop the model server and free the card."""
    record = state.snapshot().named(name)
    if record is not None and record.server is not None:
        runtime.stop(record.server, grace_s=10.0)
    return state.release(
        name,
        lambda r: evolve(
            r, server=None, workload=evolve(r.workload, state=WorkloadState.STOPPED, since=now())
        ),
    )
