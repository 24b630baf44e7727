"""The one-machine plane: state in SQLite, a real model server per workload, loopback endpoints.

Why it is so: docs/adr/decisions/apps-planes.md (machine.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from nodeau.apps.batches.machine import ThisMachineBatches
from nodeau.apps.copies.machine import NoCopies
from nodeau.apps.machines.machine import ThisMachineMarks
from nodeau.apps.organisation.policy import Organisations, permit
from nodeau.apps.planes.machine_workloads import MachineWorkloads, WorkloadParts
from nodeau.apps.planes.status_rows import StatusRow, status_rows
from nodeau.apps.plans.entitlement import Plans, status_in_force
from nodeau.apps.qualification.machine import QualifyTools, ThisMachineQualification
from nodeau.apps.recovery.machine import ThisMachineRecovery
from nodeau.apps.serving.machine import ThisMachineServing
from nodeau.apps.serving.model_servers import Rules, RunRequest, admit_on_this_machine
from nodeau.apps.settings import Settings
from nodeau.domain.limits import Action
from nodeau.domain.records import spending
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import WorkloadKind

if TYPE_CHECKING:  # annotations only: each command imports what it uses
    from nodeau.apps.models.actions import Resolved
    from nodeau.apps.models.services import ModelServices
    from nodeau.domain.model_server import ServerAbilities
    from nodeau.domain.organisation import Requester
    from nodeau.domain.plans import PlanTerms
    from nodeau.domain.records import Admission, Starter, WorkloadRecord
    from nodeau.domain.refusals import Refusal
    from nodeau.ports.batches import MachineJobs
    from nodeau.ports.endpoints import LoopbackEndpoints
    from nodeau.ports.entitlements import EntitlementStore, EntitlementVerifier
    from nodeau.ports.hardware import GpuInventory
    from nodeau.ports.marks import SchedulingMarks
    from nodeau.ports.organisation import Identity, OrganisationPolicy
    from nodeau.ports.runtime import FitEstimates, ServerLogs

PLANE = "one machine (state in SQLite, no Kubernetes)"


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
    def endpoints(self) -> LoopbackEndpoints: ...

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

    @property
    def server_logs(self) -> ServerLogs: ...

    @property
    def fit_estimates(self) -> FitEstimates:
        """The model server's own memory estimate of a configuration (a second opinion)."""
        ...

    @property
    def identity(self) -> Identity:
        """Who asks: the local user this process runs as."""
        ...

    @property
    def organisation_policy(self) -> OrganisationPolicy:
        """The organisation's policy, kept under NODEAU_HOME."""
        ...

    @property
    def entitlements(self) -> EntitlementStore:
        """The installed entitlement, kept under NODEAU_HOME."""
        ...

    @property
    def verifier(self) -> EntitlementVerifier:
        """What verifies an entitlement's signature (the keys compiled into the package)."""
        ...


class MachinePlane:
    """``Plane`` on this machine."""

    def __init__(self, settings: Settings, parts: MachineParts, clock: Callable[[], datetime]):
        self._settings = settings
        self._parts = parts
        self._clock = clock

    @property
    def description(self) -> str:
        return PLANE

    # -- services (apps.serving)

    @cached_property
    def serving(self) -> ThisMachineServing:
        return ThisMachineServing(
            settings=self._settings,
            parts=self._parts,
            listing=self._listing,
            admit=self._admit,
            rules=self._rules,
            clock=self._clock,
            permit=self._permit,
            stop_batch=self._stop_batch,
        )

    def _admit(
        self, resolved: Resolved, request: RunRequest, kind: WorkloadKind
    ) -> tuple[Admission, bool] | Refusal:
        """The one admission of a service or batch job on this machine."""
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

    @cached_property
    def _listing(self) -> MachineWorkloads:
        return MachineWorkloads(self._settings, self._parts, self._clock)

    # -- who asks, the organisation's policy, the plan's terms (apps.organisation)

    def _requester(self) -> Requester:
        return self._parts.identity.requester()

    def _policy(self) -> OrganisationPolicy:
        return self._parts.organisation_policy

    def _permit(self, action: str) -> None:
        """Nothing when the person asking may take ``action``; ``NotAllowed`` otherwise."""
        permit(self._policy().read(), self._requester(), Action(action))

    def _plan_terms(self) -> PlanTerms:
        return status_in_force(*self._entitlements(), self._clock()).terms

    def _rules(self) -> Rules:
        return Rules(
            plan=self._plan_terms(),
            organisation=self._policy().read(),
            requester=self._requester(),
        )

    @cached_property
    def organisation(self) -> Organisations:
        return Organisations(
            plane=PLANE,
            policy=self._policy,
            requester=self._requester,
            terms=self._plan_terms,
            spent=lambda: spending(self._records()),
        )

    @cached_property
    def qualification(self) -> ThisMachineQualification:
        return ThisMachineQualification(
            settings=self._settings, parts=self._parts, clock=self._clock, rules=self._rules
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
        m = self._parts.models
        return status_rows(m.store.files(), m.registry.book(), m.catalog(), self._settings.machine)

    # -- plan (apps.plans): the entitlement is kept under NODEAU_HOME

    def _entitlements(self) -> tuple[EntitlementStore, EntitlementVerifier]:
        return self._parts.entitlements, self._parts.verifier

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
        return ThisMachineBatches(
            parts=self._parts,
            records=self._records,
            admit=self._admit_batch,
            clock=self._clock,
            permit=self._permit,
        )

    def _stop_batch(self, name: str) -> str:
        return self.batches.stop(name)

    def _admit_batch(
        self, resolved: Resolved, request: RunRequest
    ) -> tuple[Admission, bool] | Refusal:
        self._listing.refuse_unknown_servers()
        return self._admit(resolved, request, WorkloadKind.BATCH)

    # -- plumbing

    def _records(self) -> tuple[WorkloadRecord, ...]:
        return self._listing.records()

    def _ledger(self) -> Ledger:
        if not self._settings.state_path.exists():
            return Ledger()
        return self._parts.state.snapshot().ledger
