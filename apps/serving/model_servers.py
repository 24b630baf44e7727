"""Serving use-cases on the one-machine plane: admit, start, stop.

Why it is so: docs/adr/decisions/apps.md (serving/model_servers.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

from attrs import evolve, frozen
from returns.result import Failure, Result, Success

from nodeau.apps.models.actions import Resolved
from nodeau.apps.models.services import ModelServices
from nodeau.apps.serving.commands import RunAsk
from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.catalog import catalog_claims
from nodeau.domain.decision import AskFacts, Checked, checks, decide
from nodeau.domain.hardware import Fleet, Machine, MachineReading
from nodeau.domain.lifecycle import ServerPhase, server_moved, with_state
from nodeau.domain.limits import RequestShape
from nodeau.domain.marking import Marks
from nodeau.domain.memory import predictor
from nodeau.domain.model_info import runtime_config
from nodeau.domain.model_server import ServerAbilities, abilities_text, card_refusal
from nodeau.domain.organisation import Organisation, Requester
from nodeau.domain.plans import PlanTerms
from nodeau.domain.qualification import task_refusal
from nodeau.domain.records import Starter, spending
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.scheduling import FleetView, exclusions, scheduled_admission
from nodeau.domain.split_placement import SplitAsk
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, WorkloadState
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.runtime import ModelRuntime, RunningServer, RuntimeFailure, ServerSpec, Stopper
from nodeau.ports.state import Admission, Snapshot, StateStore, WorkloadRecord

READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0


@frozen(kw_only=True)
class Rules:
    """What a decision respects besides the hardware: the plan in force, the organisation's
    policy (roles, limits, quotas), and who is asking."""

    plan: PlanTerms
    organisation: Organisation
    requester: Requester


@frozen(kw_only=True)
class RunRequest:
    name: str
    task: Task
    context_tokens: int | None
    recovery: RecoveryMode
    recovery_after: timedelta
    on_cpu: bool = False  # asked with --cpu: the card is held, the model runs on the CPU
    unproved: bool = False  # asked with --unproved (or a qualification's own run)

    @classmethod
    def of(cls, ask: RunAsk, name: str) -> RunRequest:
        """What ``nodeau run`` asks of this machine, for the workload called ``name``."""
        return cls(
            name=name,
            task=ask.task,
            context_tokens=ask.context_tokens,
            recovery=ask.recovery,
            recovery_after=ask.recovery_after,
            on_cpu=ask.on_cpu,
            unproved=ask.unproved,
        )


def fleet_of_one(reading: MachineReading) -> Fleet:
    """This machine as a fleet of one, from what its hardware reading says."""
    return Fleet(machines=(Machine(name=reading.machine, gpus=tuple(r.gpu for r in reading.gpus)),))


@frozen(kw_only=True)
class RunDecision:
    """What a run of one model asks of this machine, decided over a snapshot by the domain's
    one order of checks (``domain.decision``), inside the state's transaction."""

    asked: AskFacts
    place: Callable[[Snapshot], Result[Admission, Refusal]]
    simulated: bool  # the machine's cards are simulated

    def checks(self, snapshot: Snapshot) -> Iterator[Checked]:
        """Each check over ``snapshot``, as ``plan explain`` shows them."""
        return checks(self.asked, spending(snapshot.workloads), lambda: self.place(snapshot))

    def decide(self, snapshot: Snapshot) -> Result[Admission, Refusal]:
        return decide(self.asked, spending(snapshot.workloads), lambda: self.place(snapshot))


def run_decision(
    resolved: Resolved,
    request: RunRequest,
    *,
    kind: WorkloadKind,
    models: ModelServices,
    inventory: GpuInventory,
    marks: Marks,
    rules: Rules,
    server: ServerAbilities,
    now: datetime,
) -> RunDecision | Refusal:
    """The decision a run of ``resolved`` makes on a snapshot: what it is proved for, the
    model server's use of this machine's cards (a real card only to a server that can use
    it, unless the CPU was asked for), the organisation's permission, limits and quotas
    (counted over the snapshot, so two requests at once cannot both spend the last of a
    quota), then admission and placement on this machine with its marks (drained, policy)
    and the plan's bounds applied; or the refusal when the model has no verified copy here
    (its architecture values are read from the file)."""
    path = models.store.verified_path(resolved.artifact.files[0].sha256)
    if path is None:
        return no_verified_copy(request.name, models.settings.machine)
    summary = models.inspector.inspect(path)
    config = runtime_config(summary, request.task, request.context_tokens)
    reading = inventory.read()
    artifact = resolved.artifact.id
    asked = AskFacts(
        shape=RequestShape(
            model=resolved.display_name,
            artifact_id=artifact.hex,
            context_tokens=config.context_tokens,
            model_bytes=resolved.artifact.size_bytes,
        ),
        task=request.task,
        qualification=None
        if request.unproved
        else task_refusal(
            catalog=catalog_claims(models.catalog(), artifact.hex),
            evidence=models.registry.evidence().for_artifact(artifact),
            task=request.task,
            model=resolved.display_name,
        ),
        unproved=request.unproved,
        server=card_refusal(server, reading.real_cards, on_cpu=request.on_cpu),
        server_said=abilities_text(server),
        organisation=rules.organisation,
        requester=rules.requester,
    )
    admission_request = AdmissionRequest(
        workload=request.name,
        model=resolved.display_name,
        artifact_id=artifact.hex,
        config=config,
        names=resolved.names,
    )
    predict = predictor(
        arch=summary.architecture,
        artifact_id=artifact.hex,
        artifact_bytes=resolved.artifact.size_bytes,
        config=config,
        table=models.registry.measurements(),
        allowances=models.settings.allowances,
    )
    fleet = fleet_of_one(reading)
    split = (
        None
        if summary.layers is None or request.on_cpu or not server.splits_layers
        else SplitAsk(
            arch=summary.architecture,
            weights=summary.layers,
            config=config,
            allowances=models.settings.allowances,
        )
    )
    excluded = exclusions(
        machines=(reading.machine,),
        drained=marks.drained,
        health={},
        limits=rules.organisation.limits,
    )

    def place(snapshot: Snapshot) -> Result[Admission, Refusal]:
        view = FleetView(
            fleet=fleet,
            ledger=snapshot.ledger,
            settings=marks.settings,
            excluded=excluded,
            verified_on=frozenset({reading.machine}),
            predict=predict,
            plan=rules.plan,
            split=split,
        )
        return scheduled_admission(
            admission_request,
            view,
            kind=kind,
            recovery=request.recovery if kind is WorkloadKind.SERVICE else RecoveryMode.NEVER,
            recovery_after=request.recovery_after,
            model_path=lambda _machine: str(path),
            now=now,
        ).map(lambda a: evolve(a, record=_asked(a.record, rules.requester, request.on_cpu)))

    return RunDecision(asked=asked, place=place, simulated=reading.simulated)


def _asked(record: WorkloadRecord, requester: Requester, on_cpu: bool) -> WorkloadRecord:
    """The record of an admission with who asked and whether it asked for the CPU."""
    return evolve(record, requester=requester, workload=evolve(record.workload, on_cpu=on_cpu))


def admit_on_this_machine(
    resolved: Resolved,
    request: RunRequest,
    *,
    kind: WorkloadKind,
    models: ModelServices,
    inventory: GpuInventory,
    state: StateStore,
    marks: Marks,
    rules: Rules,
    server: ServerAbilities,
    now: datetime,
    starter: Starter | None = None,
) -> tuple[Admission, bool] | Refusal:
    """Admission and placement on this machine, recorded in one state transaction; the
    admission and whether the cards are simulated, or the refusal (nothing recorded).
    ``starter``: the process that goes on to start its model server, recorded with the
    admission, so a start killed before the server exists is said, never awaited."""
    decision = run_decision(
        resolved,
        request,
        kind=kind,
        models=models,
        inventory=inventory,
        marks=marks,
        rules=rules,
        server=server,
        now=now,
    )
    if isinstance(decision, Refusal):
        return decision
    decide: Callable[[Snapshot], Result[Admission, Refusal]] = decision.decide
    if starter is not None:
        decide = _started_by(decide, starter)
    match state.admit(request.name, decide):
        case Success(Admission() as admission):
            return admission, decision.simulated
        case Failure(Refusal() as refusal):
            return refusal
    raise AssertionError("admit answers a Result")


def _started_by(
    decide: Callable[[Snapshot], Result[Admission, Refusal]], starter: Starter
) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    """``decide``, its admitted record naming ``starter``."""

    def deciding(snapshot: Snapshot) -> Result[Admission, Refusal]:
        return decide(snapshot).map(lambda a: evolve(a, record=evolve(a.record, starter=starter)))

    return deciding


def no_verified_copy(name: str, machine: str) -> Refusal:
    return Refusal.of(
        ReasonCode.NO_VERIFIED_COPY,
        f"{name} has no verified copy on {machine}; pull or import it, then run it",
    )


def launch_server(
    admission: Admission,
    *,
    simulated: bool,
    runtime: ModelRuntime,
    state: StateStore,
    log_dir: Path,
    now: Callable[[], datetime],
    starter: Starter,
    log_buffers: bool = False,
) -> RunningServer:
    """Start the admitted workload's model server (starting, then up), recorded as started
    by ``starter`` (this process); ``log_buffers``: its log also reports the buffers it
    allocates (a qualification reads them).

    If it cannot start, its card is freed and it is recorded failed before the
    RuntimeFailure goes on to the caller.
    """
    record = admission.record
    name = record.workload.name
    on_cpu = simulated or record.workload.on_cpu
    spec = ServerSpec(
        name=name,
        model_path=Path(record.model_path),
        config=record.config,
        gpu_uuid=None if on_cpu else record.workload.gpu_uuid,
        log_path=log_dir / f"{name}.log",
        log_buffers=log_buffers,
        split=() if on_cpu else record.workload.split,
    )
    log_dir.mkdir(parents=True, exist_ok=True)

    def launched(server: RunningServer) -> None:
        state.update(name, lambda r: evolve(r, server=server))

    try:
        state.update(  # no server yet: one is made for it now
            name, lambda r: evolve(server_moved(r, ServerPhase.ABSENT, now()), starter=starter)
        )
        return runtime.start(spec, READY_TIMEOUT_S, launched=launched)
    except RuntimeFailure:
        state.release(name, lambda r: _ended(r, now()))
        raise
    except BaseException:  # interrupted (Ctrl-C, SIGTERM, SIGHUP): nothing left on the card
        record_now = state.snapshot().named(name)
        if record_now is not None and record_now.server is not None:
            runtime.stop(record_now.server, grace_s=STOP_GRACE_S)
        state.release(name, lambda r: _ended(r, now()))
        raise


def _ended(record: WorkloadRecord, at: datetime) -> WorkloadRecord:
    """The record once its server, failing to start or stopped mid-start, has ended."""
    return server_moved(evolve(record, server=None), ServerPhase.EXITED_FAILED, at)


def start_server(
    admission: Admission,
    *,
    simulated: bool,
    runtime: ModelRuntime,
    state: StateStore,
    log_dir: Path,
    now: Callable[[], datetime],
    starter: Starter,
    endpoint_port: int,
) -> WorkloadRecord:
    """Start the admitted service's model server and record it serving (or failed)."""
    server = launch_server(
        admission,
        simulated=simulated,
        runtime=runtime,
        state=state,
        log_dir=log_dir,
        now=now,
        starter=starter,
    )
    return record_serving(state, admission.record.workload.name, server, endpoint_port, now())


def record_serving(
    state: StateStore, name: str, server: RunningServer, endpoint_port: int, at: datetime
) -> WorkloadRecord:
    return state.update(
        name,
        lambda r: evolve(
            server_moved(r, ServerPhase.READY, at),  # it answers: a started service serves
            server=server,
            starter=None,
            endpoint_port=r.endpoint_port or endpoint_port,
        ),
    )


def stop_workload(
    name: str, *, state: StateStore, runtime: Stopper, now: Callable[[], datetime]
) -> WorkloadRecord:
    """Stop the model server and free the card: the record is all it needs (``runtime``
    stops the process it names, and any other its search by the workload's name and model
    file finds; no model server need be installed)."""
    record = state.snapshot().named(name)
    if record is not None and record.server is not None:
        runtime.stop(record.server, grace_s=STOP_GRACE_S)
    if record is not None:  # and whatever an interrupted start left that no record names
        for stray in runtime.found(name, record.model_path):
            runtime.stop(stray, grace_s=STOP_GRACE_S)
    return state.release(
        name,
        lambda r: with_state(evolve(r, server=None), WorkloadState.STOPPED, now()),
    )
