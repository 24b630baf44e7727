"""Serving use-cases on the one-machine plane: admit, start, stop.

``admit_on_this_machine`` decides before it creates anything: the model must be verified
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
from returns.result import Failure, Result, Success

from nodeau.apps.model_services import ModelServices
from nodeau.apps.models import Resolved
from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.hardware import Fleet, Machine, MachineReading
from nodeau.domain.limits import OrgLimits
from nodeau.domain.memory import Prediction, RuntimeConfig, predictor
from nodeau.domain.model_info import runtime_config
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.scheduling import FleetView, Marks, exclusions, scheduled_admission
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import (
    RecoveryMode,
    WorkloadKind,
    WorkloadState,
)
from nodeau.ports.hardware import GpuInventory
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


def decide_run(
    *,
    request: RunRequest,
    kind: WorkloadKind,
    resolved: Resolved,
    model_path: Path,
    config: RuntimeConfig,
    reading: MachineReading,
    predict: Callable[[str], Prediction],
    marks: Marks,
    now: datetime,
) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    """The decision ``StateStore.admit`` runs on its snapshot, inside its transaction:
    admission and placement on this machine with its marks (drained, policy) applied."""
    fleet = fleet_of_one(reading)
    admission_request = AdmissionRequest(
        workload=request.name,
        model=resolved.display_name,
        artifact_id=resolved.artifact.id.hex,
        config=config,
    )
    excluded = exclusions(
        machines=(reading.machine,),
        drained=marks.drained,
        health={},
        limits=OrgLimits.unbounded(),
    )

    def decide(snapshot: Snapshot) -> Result[Admission, Refusal]:
        view = FleetView(
            fleet=fleet,
            ledger=snapshot.ledger,
            settings=marks.settings,
            excluded=excluded,
            verified_on=frozenset({reading.machine}),
            predict=predict,
        )
        return scheduled_admission(
            admission_request,
            view,
            kind=kind,
            recovery=request.recovery if kind is WorkloadKind.SERVICE else RecoveryMode.NEVER,
            recovery_after=request.recovery_after,
            model_path=lambda _machine: str(model_path),
            now=now,
        )

    return decide


def admit_on_this_machine(
    resolved: Resolved,
    request: RunRequest,
    *,
    kind: WorkloadKind,
    models: ModelServices,
    inventory: GpuInventory,
    state: StateStore,
    marks: Marks,
    now: datetime,
) -> tuple[Admission, bool] | Refusal:
    """Admission and placement on this machine, recorded in one state transaction; the
    admission and whether the cards are simulated, or the refusal (nothing recorded).

    The model must be verified here: its architecture values are read from the file.
    """
    path = models.store.verified_path(resolved.artifact.files[0].sha256)
    if path is None:
        return no_verified_copy(request.name, models.settings.machine)
    summary = models.inspector.inspect(path)
    config = runtime_config(summary, request.task, request.context_tokens)
    reading = inventory.read()
    decide = decide_run(
        request=request,
        kind=kind,
        resolved=resolved,
        model_path=path,
        config=config,
        reading=reading,
        predict=predictor(
            arch=summary.architecture,
            artifact_id=resolved.artifact.id.hex,
            artifact_bytes=resolved.artifact.size_bytes,
            config=config,
            table=models.registry.measurements(),
            allowances=models.settings.allowances,
        ),
        marks=marks,
        now=now,
    )
    match state.admit(request.name, decide):
        case Success(Admission() as admission):
            return admission, reading.simulated
        case Failure(Refusal() as refusal):
            return refusal
    raise AssertionError("admit answers a Result")


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
    simulated: bool,
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
    simulated: bool,
    runtime: ModelRuntime,
    state: StateStore,
    log_dir: Path,
    now: Callable[[], datetime],
    endpoint_port: int,
) -> WorkloadRecord:
    """Start the admitted service's model server and record it serving (or failed)."""
    server = launch_server(
        admission, simulated=simulated, runtime=runtime, state=state, log_dir=log_dir, now=now
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
