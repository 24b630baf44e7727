"""The one-machine plane: state in SQLite, a real model server per workload, loopback endpoints.

Why it is so: docs/adr/decisions/apps-planes.md (machine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from nodeau.apps.copies.machine import NoCopies
from nodeau.apps.machines.machine import ThisMachineMarks
from nodeau.apps.planes.machine_workloads import (
    MachineWorkloads,
    WorkloadParts,
    reservation_source,
    workload_view,
)
from nodeau.apps.planes.organisation import Organisations
from nodeau.apps.planes.plan import Plans
from nodeau.apps.planes.plane import (
    Refused,
    RunAsk,
    RunOutcome,
    Started,
)
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.recovery.machine import ThisMachineRecovery
from nodeau.apps.settings import Settings
from nodeau.domain.workloads import WorkloadKind, WorkloadState
from nodeau.ports.errors import NodeauError, SettingsError

if TYPE_CHECKING:  # annotations only: each command imports what it uses
    from pathlib import Path

    from nodeau.apps.batches.machine import ThisMachineBatches
    from nodeau.apps.endpoint_services import Endpoints
    from nodeau.apps.model_services import ModelServices
    from nodeau.apps.models import Resolved
    from nodeau.apps.planes.plane import Explanation
    from nodeau.apps.planes.status_rows import StatusRow
    from nodeau.apps.qualification.machine import ThisMachineQualification
    from nodeau.apps.qualification.machine_qualify import QualifyTools
    from nodeau.apps.serving.model_servers import Rules, RunRequest
    from nodeau.domain.model_server import ServerAbilities
    from nodeau.domain.organisation import Requester
    from nodeau.domain.plans import PlanTerms
    from nodeau.domain.records import Admission, Starter, WorkloadRecord
    from nodeau.domain.refusals import Refusal
    from nodeau.domain.reservations import Ledger
    from nodeau.domain.runs import RunsWith
    from nodeau.ports.batches import MachineJobs
    from nodeau.ports.entitlements import EntitlementStore, EntitlementVerifier
    from nodeau.ports.hardware import GpuInventory
    from nodeau.ports.marks import SchedulingMarks
    from nodeau.ports.organisation import Identity, OrganisationPolicy
    from nodeau.ports.runtime import RunningServer

PLANE = "one machine (state in SQLite, no Kubernetes)"
LOG_LINES = 50  # ``nodeau logs`` without --lines


class MachineParts(WorkloadParts, Protocol):
    """The adapters the plane uses, each built when first asked for: what listing the
    workloads uses, and these."""

    @property
    def models(self) -> ModelServices: ...

    @property
    def inventory(self) -> GpuInventory: ...

    @property
    def marks(self) -> SchedulingMarks: ...

    @property
    def server(self) -> ServerAbilities:
        """What the model server can use, as it says (a SettingsError when none is found)."""
        ...

    @property
    def endpoints(self) -> Endpoints: ...

    @property
    def jobs(self) -> MachineJobs:
        """This machine's batch jobs and their workers."""
        ...

    @property
    def qualifying(self) -> QualifyTools:
        """How a qualification probes and watches the model servers it starts here."""
        ...

    @property
    def starter(self) -> Starter:
        """This process, as the one starting a model server (a start it leaves unfinished
        is said, never awaited)."""
        ...


def workload_name(asked: str | None, resolved: Resolved) -> str:
    """``--name`` when valid, else a name made from the model's."""
    from nodeau.domain.runs import name_from_model, name_problem

    if asked is not None:
        if (problem := name_problem(asked)) is not None:
            raise SettingsError(f"--name {problem}")
        return asked
    made = name_from_model(resolved.display_name)
    if made is None:
        raise SettingsError(
            f"cannot make a workload name from {resolved.display_name!r}; give --name"
        )
    return made


def allowed_origins(given: tuple[str, ...]) -> tuple[str, ...]:
    """``--allow-origin`` values as browsers send them; a SettingsError for one that is not."""
    from nodeau.domain.origins import parse_origin

    try:
        return tuple(parse_origin(o) for o in given)
    except ValueError as exc:
        raise SettingsError(f"--allow-origin {exc}") from exc


class MachinePlane:
    """``Plane`` on this machine."""

    def __init__(
        self,
        settings: Settings,
        parts: MachineParts,
        clock: Callable[[], datetime],
        verifier: EntitlementVerifier | None = None,
        identity: Identity | None = None,
    ) -> None:
        self._settings = settings
        self._parts = parts
        self._clock = clock
        self._verifier = verifier  # None: the keys compiled into the package
        self._identity = identity  # None: the local user this process runs as

    @property
    def description(self) -> str:
        return PLANE

    @property
    def simulated(self) -> bool:
        return self._settings.simulated_gpus is not None

    # -- services

    def run(self, ask: RunAsk) -> RunOutcome:
        from nodeau.apps.models import resolve_model
        from nodeau.apps.serving.model_servers import RunRequest, start_server, stop_workload
        from nodeau.domain.refusals import Refusal
        from nodeau.domain.runs import Admit, Asked, EndpointBack, NameTaken, NotAsAsked, run_step
        from nodeau.ports.state import StateError

        models = self._parts.models
        resolved = resolve_model(ask.model, models.registry.book(), models.catalog())
        name = workload_name(ask.name, resolved)
        origins = allowed_origins(ask.allowed_origins)
        existing = self._snapshot_record(name)
        artifact_id = resolved.artifact.id.hex
        step = run_step(
            None if existing is None else existing.workload,
            artifact_id=artifact_id,
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
                    workload=workload_view(existing, self._clock(), self.simulated),
                    reserved_bytes=None,
                    source=None,
                    already=True,
                    endpoint_service=how,
                )
            case Admit():
                pass
        self._refuse_unknown_servers()
        request = RunRequest(
            name=name,
            task=ask.task,
            context_tokens=ask.context_tokens,
            recovery=ask.recovery,
            recovery_after=ask.recovery_after,
            on_cpu=ask.on_cpu,
            unproved=ask.unproved,
        )
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
        from nodeau.domain.runs import runs_with

        port = record.endpoint_port
        if port is None or not self._parts.endpoint_listens(port):
            return runs_with(record, None)
        return runs_with(record, self._parts.endpoints.allowed_origins(record.workload.name) or ())

    def _admit(
        self, resolved: Resolved, request: RunRequest, kind: WorkloadKind
    ) -> tuple[Admission, bool] | Refusal:
        from nodeau.apps.serving.model_servers import admit_on_this_machine

        marks = self._parts.marks.read()
        return admit_on_this_machine(
            resolved,
            request,
            kind=kind,
            models=self._parts.models,
            inventory=self._parts.inventory,
            state=self._parts.state,
            marks=marks,
            rules=self._rules(),
            server=self._parts.server,
            now=self._clock(),
            # a service's start is this command's from its admission on; a batch job's
            # worker names itself once it starts the server
            starter=self._parts.starter if kind is WorkloadKind.SERVICE else None,
        )

    # -- who asks, the organisation's policy, the plan's terms (apps.planes.organisation)

    def _requester(self) -> Requester:
        from nodeau.adapters.local_identity import LocalIdentity

        return (self._identity or LocalIdentity()).requester()

    def _policy(self) -> OrganisationPolicy:
        from nodeau.adapters.organisation_file import FileOrganisationPolicy

        return FileOrganisationPolicy(self._settings.home)

    def _permit(self, action: str) -> None:
        """Nothing when the person asking may take ``action``; ``NotAllowed`` otherwise."""
        from nodeau.apps.planes.organisation import permit
        from nodeau.domain.limits import Action

        permit(self._policy().read(), self._requester(), Action(action))

    def _plan_terms(self) -> PlanTerms:
        from nodeau.apps.planes.plan import status_in_force

        return status_in_force(*self._entitlements(), self._clock()).terms

    def _rules(self) -> Rules:
        from nodeau.apps.serving.model_servers import Rules

        return Rules(
            plan=self._plan_terms(),
            organisation=self._policy().read(),
            requester=self._requester(),
        )

    @cached_property
    def organisation(self) -> Organisations:
        from nodeau.domain.records import spending

        return Organisations(
            plane=PLANE,
            policy=self._policy,
            requester=self._requester,
            terms=self._plan_terms,
            spent=lambda: spending(self._records()),
        )

    def explain_run(self, ask: RunAsk) -> Explanation:
        from nodeau.apps.planes.machine_explain import explain_run

        return explain_run(self._parts, ask, self._rules(), self._clock())

    @cached_property
    def _listing(self) -> MachineWorkloads:
        return MachineWorkloads(self._settings, self._parts, self._clock)

    def workloads(self) -> tuple[WorkloadView, ...]:
        return self._listing.views()

    def _unknown_servers(
        self, records: Sequence[WorkloadRecord] | None = None
    ) -> tuple[tuple[str, RunningServer], ...]:
        return self._listing.unknown_servers(records)

    def _refuse_unknown_servers(self) -> None:
        """A StateError while model servers of this home run that the state does not name:
        which cards they hold cannot be known, so nothing is admitted."""
        from nodeau.ports.state import StateError

        unknown = self._unknown_servers()
        if unknown:
            listed = ", ".join(f"{name} (pid {server.pid})" for name, server in unknown)
            raise StateError(
                f"model servers of this home run that {self._settings.state_path} does not "
                f"name: {listed}; the state was lost or emptied, so which cards they hold is "
                "unknown and nothing is admitted until each is stopped (nodeau stop NAME "
                "--workload)"
            )

    @cached_property
    def qualification(self) -> ThisMachineQualification:
        from nodeau.apps.qualification.machine import ThisMachineQualification

        return ThisMachineQualification(
            settings=self._settings, parts=self._parts, clock=self._clock, rules=self._rules
        )

    def logs(self, name: str, lines: int = LOG_LINES) -> tuple[str, ...]:
        """The last ``lines`` lines of workload ``name``'s model server log."""
        from nodeau.adapters.model_server_process import log_tail

        return log_tail(self._log_of(name), lines)

    def follow_logs(self, name: str, lines: int = LOG_LINES) -> Iterator[str]:
        """The last ``lines`` lines of ``name``'s model server log, then each new one."""
        from nodeau.adapters.log_follow import follow_log

        return follow_log(self._log_of(name), lines)

    def _log_of(self, name: str) -> Path:
        """Where ``name``'s model server logs; ``UnknownWorkload`` when nothing names it."""
        from nodeau.domain.runs import name_problem
        from nodeau.ports.state import UnknownWorkload

        path = self._settings.log_dir / f"{name}.log"
        unknown = UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
        if name_problem(name) is not None:
            raise unknown
        if self._snapshot_record(name) is None and not path.is_file():
            raise unknown
        return path

    def stop(self, name: str, *, workload: bool) -> str:
        from nodeau.apps.serving.model_servers import stop_workload

        self._permit("stop")
        record = self._snapshot_record(name)
        if record is None:
            return self._stop_unknown(name, workload=workload)
        if record.workload.kind is WorkloadKind.BATCH:
            if not workload:
                return (
                    f"{name} is a batch job: it has no endpoint to stop "
                    "(nodeau stop NAME --workload stops it and frees its card)"
                )
            return self.batches.stop(name)
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
        return f"{name}: endpoint and model stopped; {released.workload.gpu_uuid} is free"

    def _stop_unknown(self, name: str, *, workload: bool) -> str:
        """Stop the model servers of this home serving ``name`` that no record names."""
        from nodeau.ports.state import UnknownWorkload

        found = [s for n, s in self._unknown_servers() if n == name]
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
        from nodeau.ports.state import UnknownWorkload

        if not self._settings.state_path.exists():
            raise UnknownWorkload(f"no workload called {name!r}; nodeau ps lists them")
        return self._parts.state.admission(name)

    def runtime_estimate(self, name: str) -> str | None:
        from pathlib import Path

        from nodeau.adapters.progress import size_text
        from nodeau.adapters.runtime_estimate import RuntimeEstimate
        from nodeau.adapters.runtime_estimate import runtime_estimate as fit_estimate
        from nodeau.ports.runtime import ServerSpec

        record = self.admission(name).record
        w = record.workload
        running = record.server.command if record.server is not None else ()
        program = Path(running[0]) if running and "llama_cpp.server" not in running else None
        if program is None:
            try:
                program = Path(self._parts.server.program)
            except NodeauError:
                return None  # no model server here to ask: explaining needs none
        on_card = not (self.simulated or w.on_cpu)
        spec = ServerSpec(
            name=name,
            model_path=Path(record.model_path),
            config=record.config,
            gpu_uuid=w.gpu_uuid if on_card else None,
            log_path=Path("/dev/null"),
        )
        shown = {**self._settings.environ, "CUDA_VISIBLE_DEVICES": w.gpu_uuid if on_card else ""}
        said = fit_estimate(program, spec, shown)
        if not isinstance(said, RuntimeEstimate):
            return None  # a second opinion only: the admission figure stands alone
        return (
            f"runtime's own estimate: {size_text(said.bytes)} of {said.where} memory "
            f"({Path(said.tool).name}, whole MiB, asked now; the admission figure is above)"
        )

    # -- recovery (apps.recovery)

    @cached_property
    def recovery(self) -> ThisMachineRecovery:
        return ThisMachineRecovery(
            plane=PLANE,
            machine=self._settings.machine,
            parts=self._parts,
            records=self._records,
            clock=self._clock,
            permit=self._permit,
        )

    # -- copies (apps.copies): kept between the machines of a fleet

    @cached_property
    def copies(self) -> NoCopies:
        return NoCopies()

    # -- this machine's model files

    def model_status(self) -> tuple[StatusRow, ...]:
        from nodeau.apps.planes.status_rows import status_rows

        m = self._parts.models
        return status_rows(m.store.files(), m.registry.book(), m.catalog(), self._settings.machine)

    # -- plan (apps.planes.plan): the entitlement is kept under NODEAU_HOME

    def _entitlements(self) -> tuple[EntitlementStore, EntitlementVerifier]:
        from nodeau.adapters.entitlement_document import compiled_in_verifier
        from nodeau.adapters.entitlement_file import FileEntitlementStore

        verifier = compiled_in_verifier() if self._verifier is None else self._verifier
        return FileEntitlementStore(self._settings.home), verifier

    @cached_property
    def plans(self) -> Plans:
        return Plans(
            plane=PLANE, entitlements=self._entitlements, clock=self._clock, permit=self._permit
        )

    # -- machines and marks (apps.machines)

    @cached_property
    def machines(self) -> ThisMachineMarks:
        return ThisMachineMarks(
            plane=PLANE,
            machine=self._settings.machine,
            parts=self._parts,
            ledger=self._ledger,
            clock=self._clock,
            permit=self._permit,
        )

    # -- batch jobs (apps.batches)

    @cached_property
    def batches(self) -> ThisMachineBatches:
        from nodeau.apps.batches.machine import ThisMachineBatches

        return ThisMachineBatches(
            parts=self._parts,
            records=self._records,
            admit=self._admit_batch,
            clock=self._clock,
            permit=self._permit,
        )

    def _admit_batch(
        self, resolved: Resolved, request: RunRequest
    ) -> tuple[Admission, bool] | Refusal:
        self._refuse_unknown_servers()
        return self._admit(resolved, request, WorkloadKind.BATCH)

    # -- plumbing

    def _records(self) -> tuple[WorkloadRecord, ...]:
        return self._listing.records()

    def _snapshot_record(self, name: str) -> WorkloadRecord | None:
        return next((r for r in self._records() if r.workload.name == name), None)

    def _ledger(self) -> Ledger:
        from nodeau.domain.reservations import Ledger

        if not self._settings.state_path.exists():
            return Ledger()
        return self._parts.state.snapshot().ledger


def started_outcome(
    admission: Admission, record: WorkloadRecord, now: datetime, simulated: bool, how: str | None
) -> Started:
    """What ``run`` reports for a workload it admitted and started."""
    return Started(
        workload=workload_view(record, now, simulated),
        reserved_bytes=admission.placement.reservation.bytes,
        source=reservation_source(admission),
        endpoint_service=how,
    )
