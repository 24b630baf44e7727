"""``ServingCommands`` on this machine: a run admitted over the state's ledger and started as
a local model server behind a loopback endpoint; stop, ``ps``, logs and explain.

Why it is so: docs/adr/decisions/apps-planes.md (apps/serving/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps.models.actions import Resolved, resolve_model
from nodeau.apps.planes.machine_workloads import (
    MachineWorkloads,
    reservation_source,
    workload_view,
)
from nodeau.apps.serving.commands import (
    Explanation,
    Refused,
    RunAsk,
    RunOutcome,
    Started,
    check_view,
    workload_name,
)
from nodeau.apps.serving.model_servers import (
    Rules,
    RunRequest,
    run_decision,
    start_server,
    stop_workload,
)
from nodeau.apps.settings import Settings
from nodeau.domain.decision import Checked, first_refusal
from nodeau.domain.origins import parse_origin
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.refusals import Refusal
from nodeau.domain.runs import (
    Admit,
    Asked,
    EndpointBack,
    NameTaken,
    NotAsAsked,
    RunsWith,
    name_problem,
    run_step,
    runs_with,
)
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.errors import NodeauError, SettingsError
from nodeau.ports.runtime import FitEstimate, ServerSpec
from nodeau.ports.state import StateError, UnknownWorkload

MIB = 1024 * 1024

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts
    from nodeau.apps.planes.workload_view import WorkloadView
    from nodeau.apps.serving.model_servers import Rules

PLANE = "this machine"

AdmitRun = Callable[[Resolved, RunRequest, WorkloadKind], "tuple[Admission, bool] | Refusal"]


def allowed_origins(given: tuple[str, ...]) -> tuple[str, ...]:
    """``--allow-origin`` values as browsers send them; a SettingsError for one that is not."""
    try:
        return tuple(parse_origin(o) for o in given)
    except ValueError as exc:
        raise SettingsError(f"--allow-origin {exc}") from exc


def started_outcome(
    admission: Admission, record: WorkloadRecord, now: datetime, simulated: bool, how: str | None
) -> Started:
    """What ``run`` reports for a workload it admitted and started."""
    return Started(
        workload=workload_view(record, now, simulated),
        reserved_bytes=sum(r.bytes for r in admission.placement.reservations),
        source=reservation_source(admission),
        endpoint_service=how,
    )


@frozen(kw_only=True)
class ThisMachineServing:
    """``ServingCommands`` where the plane is this machine; ``admit`` is the plane's one
    admission (the same checks and ledger as a batch job's), ``stop_batch`` its batch jobs'
    stop."""

    _settings: Settings
    _parts: MachineParts
    _listing: MachineWorkloads
    _admit: AdmitRun
    _rules: Callable[[], Rules]
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]
    _stop_batch: Callable[[str], str]

    @property
    def _simulated(self) -> bool:
        return self._settings.simulated_gpus is not None

    def run(self, ask: RunAsk) -> RunOutcome:
        models = self._parts.models
        resolved = resolve_model(ask.model, models.registry.book(), models.catalog())
        name = workload_name(ask.name, resolved.display_name)
        origins = allowed_origins(ask.allowed_origins)
        existing = self._listing.record(name)
        step = run_step(
            None if existing is None else existing.workload,
            artifact_id=resolved.artifact.id.hex,
            asked=ask.asked or Asked(),
            origins=origins,
            runs_with=None if existing is None else self._runs_with(existing),
        )
        match step:
            case NameTaken(sentence=sentence) | NotAsAsked(sentence=sentence):
                raise StateError(sentence)
            case EndpointBack():
                assert existing is not None and existing.endpoint_port is not None
                endpoints = self._parts.endpoints
                kept = origins or endpoints.allowed_origins(name) or ()  # not given: as it is
                how = endpoints.start(name, existing.endpoint_port, kept)
                return Started(
                    workload=workload_view(existing, self._clock(), self._simulated),
                    reserved_bytes=None,
                    source=None,
                    already=True,
                    endpoint_service=how,
                )
            case Admit():
                pass
        self._listing.refuse_unknown_servers()
        request = RunRequest.of(ask, name)
        # the model server is found (and asked what it can use) before anything is recorded
        decided = self._admit(resolved, request, WorkloadKind.SERVICE)
        if isinstance(decided, Refusal):
            return Refused(name=name, refusal=decided)
        admission, simulated = decided
        endpoints = self._parts.endpoints
        port = existing.endpoint_port if existing and existing.endpoint_port else None
        record = start_server(
            admission,
            simulated=simulated,
            runtime=self._parts.runtime,
            state=self._parts.state,
            log_dir=self._settings.log_dir,
            now=self._clock,
            starter=self._parts.starter,
            endpoint_port=port or endpoints.free_port(),
        )
        try:
            how = endpoints.start(name, record.endpoint_port or 0, origins)
        except BaseException:  # it failed, or the run was interrupted: nothing left behind
            with suppress(NodeauError):
                endpoints.stop(name)  # one that never listened is not left retrying
            stop_workload(
                name, state=self._parts.state, runtime=self._parts.runtime, now=self._clock
            )
            raise
        return started_outcome(admission, record, self._clock(), simulated, how)

    def _runs_with(self, record: WorkloadRecord) -> RunsWith:
        """What ``record``'s workload runs with, its endpoint's origins while it listens
        (none kept: none)."""
        port = record.endpoint_port
        if port is None or not self._parts.endpoint_listens(port):
            return runs_with(record, None)
        return runs_with(record, self._parts.endpoints.allowed_origins(record.workload.name) or ())

    def explain(self, ask: RunAsk) -> Explanation:
        return explain_run(self._parts, ask, self._rules(), self._clock())

    def workloads(self) -> tuple[WorkloadView, ...]:
        return self._listing.views()

    def logs(self, name: str, lines: int) -> tuple[str, ...]:
        """The last ``lines`` lines of workload ``name``'s model server log."""
        return self._parts.server_logs.tail(self._log_of(name), lines)

    def follow_logs(self, name: str, lines: int) -> Iterator[str]:
        """The last ``lines`` lines of ``name``'s model server log, then each new one."""
        return self._parts.server_logs.follow(self._log_of(name), lines)

    def _log_of(self, name: str) -> Path:
        """Where ``name``'s model server logs; ``UnknownWorkload`` when nothing names it."""
        path = self._settings.log_dir / f"{name}.log"
        unknown = UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
        if name_problem(name) is not None:
            raise unknown
        if self._listing.record(name) is None and not path.is_file():
            raise unknown
        return path

    def stop(self, name: str, *, workload: bool) -> str:
        self._permit("stop")
        record = self._listing.record(name)
        if record is None:
            return self._stop_unknown(name, workload=workload)
        if record.workload.kind is WorkloadKind.BATCH:
            if not workload:
                return (
                    f"{name} is a batch job: it has no endpoint to stop "
                    "(nodeau stop NAME --workload stops it and frees its card)"
                )
            return self._stop_batch(name)
        self._parts.endpoints.stop(name)
        if not workload:
            if record.workload.state is WorkloadState.RESTARTING:
                return (
                    f"{name}: endpoint stopped; its model server is restarting, and nothing "
                    f"restarts it until nodeau run {name} starts the endpoint again "
                    "(--workload frees the card)"
                )
            return (
                f"{name}: endpoint stopped; the model stays loaded (nodeau run starts it again "
                "at once; --workload frees the card)"
            )
        released = stop_workload(
            name, state=self._parts.state, runtime=self._parts.processes, now=self._clock
        )
        cards = released.workload.cards
        free = f"{cards[0]} is free" if len(cards) == 1 else f"{', '.join(cards)} are free"
        return f"{name}: endpoint and model stopped; {free}"

    def _stop_unknown(self, name: str, *, workload: bool) -> str:
        """Stop the model servers of this home serving ``name`` that no record names."""
        found = [s for n, s in self._listing.unknown_servers() if n == name]
        if not found:
            raise UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
        pids = ", ".join(str(s.pid) for s in found)
        if not workload:
            return (
                f"{name}: no record names it, and its model server (pid {pids}) runs: "
                f"nodeau stop {name} --workload ends it"
            )
        self._parts.endpoints.stop(name)
        for server in found:
            self._parts.processes.stop(server, grace_s=10.0)
        return f"{name}: no record named it; its model server (pid {pids}) is stopped"

    def admission(self, name: str) -> Admission:
        if not self._settings.state_path.exists():
            raise UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
        return self._parts.state.admission(name)

    def runtime_estimate(self, name: str) -> str | None:
        record = self.admission(name).record
        w = record.workload
        running = record.server.command if record.server is not None else ()
        program = Path(running[0]) if running and "llama_cpp.server" not in running else None
        if program is None:
            try:
                program = Path(self._parts.server.program)
            except NodeauError:
                return None  # no model server here to ask: explaining needs none
        on_card = not (self._simulated or w.on_cpu)
        spec = ServerSpec(
            name=name,
            model_path=Path(record.model_path),
            config=record.config,
            gpu_uuid=w.gpu_uuid if on_card else None,
            log_path=Path("/dev/null"),
            split=w.split if on_card else (),
        )
        said = self._parts.fit_estimates.estimate(program, spec)
        if not isinstance(said, FitEstimate):
            return None  # a second opinion only: the admission figure stands alone
        return (
            f"runtime's own estimate: {said.bytes // MIB} MiB of {said.where} memory "
            f"({Path(said.tool).name}, whole MiB, asked now; the admission figure is above)"
        )


def explain_run(parts: MachineParts, ask: RunAsk, rules: Rules, now: datetime) -> Explanation:
    """Whether ``ask`` would be admitted on this machine now, and each check's answer."""
    models = parts.models
    resolved = resolve_model(ask.model, models.registry.book(), models.catalog())
    request = RunRequest.of(ask, workload_name(ask.name, resolved.display_name))
    decision = run_decision(
        resolved,
        request,
        kind=WorkloadKind.SERVICE,
        models=models,
        inventory=parts.inventory,
        marks=parts.marks.read(),
        rules=rules,
        server=parts.server,
        now=now,
    )
    if isinstance(decision, Refusal):  # no verified copy here: nothing else can be read
        found: tuple[Checked, ...] = (Checked.refused(decision.kind.value, decision),)
    else:
        found = tuple(decision.checks(parts.state.snapshot()))
    refusal = first_refusal(found)
    return Explanation(
        plane=PLANE,
        user=rules.requester.user,
        model=resolved.display_name,
        context_tokens=ask.context_tokens,
        admitted=refusal is None,
        refusal=refusal,
        checks=tuple(check_view(c) for c in found),
    )
