"""The fleet on Kubernetes as a ``Plane``: the CLI asks with objects, the controller decides.

Why it is so: docs/adr/decisions/apps-planes.md (kubernetes.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from attrs import evolve, frozen

from nodeau.apps.batches.fleet import FleetBatchJobs
from nodeau.apps.copies.fleet import FleetCopies
from nodeau.apps.machines.fleet import FleetMachines
from nodeau.apps.planes.fleet_workloads import (
    PENDING,
    endpoint_off,
    find_workload,
    workload_view,
)
from nodeau.apps.planes.organisation import Organisations
from nodeau.apps.planes.plan import Plans
from nodeau.apps.planes.plane import (
    Explanation,
    LogsUnavailable,
    Refused,
    RunAsk,
    RunOutcome,
    Started,
    Undecided,
)
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.qualification.commands import QualificationUnavailable
from nodeau.apps.qualification.fleet import FleetProbes, FleetQualification
from nodeau.apps.recovery.fleet import FleetRecovery, choice_of
from nodeau.domain.catalog import Catalog
from nodeau.domain.organisation import Requester, Spending
from nodeau.domain.records import Admission
from nodeau.domain.runs import Asked, RunsWith, differences, name_from_model, name_problem
from nodeau.domain.workloads import (
    WorkloadKind,
    holds_gpu,
)
from nodeau.ports.batches import FleetBatches
from nodeau.ports.cluster import (
    BootstrapTokens,
    FleetMarks,
    HealthRecords,
    MachineReports,
    ModelCopies,
    QualificationRecords,
    ReservationLedger,
    ServerPods,
    WorkloadAsk,
    WorkloadObject,
    WorkloadObjects,
)
from nodeau.ports.entitlements import EntitlementStore, EntitlementVerifier
from nodeau.ports.errors import NodeauError, SettingsError
from nodeau.ports.organisation import Identity, OrganisationPolicy
from nodeau.ports.state import StateError

if TYPE_CHECKING:
    from nodeau.apps.model_services import ModelServices
    from nodeau.apps.planes.fleet_explain import FleetChecks
    from nodeau.apps.planes.status_rows import StatusRow

POLL_S = 0.2
KIND_NAMES = {WorkloadKind.SERVICE: "GPUService", WorkloadKind.BATCH: "BatchJob"}
NAMESPACE = "nodeau-system"


class NotDecided(StateError):
    """The object has no recorded admission (not decided yet, or refused)."""


class NotOnTheFleetYet(NodeauError):
    """Something the one-machine plane does that the fleet does not do yet."""


@frozen(kw_only=True)
class FleetCluster:
    """The cluster a command acts on: where it is, and its ports."""

    server: str
    context: str | None  # the kubeconfig context; None in-cluster
    objects: WorkloadObjects
    marks: FleetMarks
    reports: MachineReports
    health: HealthRecords
    ledger: ReservationLedger
    tokens: BootstrapTokens
    pods: ServerPods
    control_plane_label: str  # the Node label that marks a machine that decides
    server_image: str  # the model-server image the fleet's Pods run
    copies: ModelCopies | None = None  # None: a connection built for other commands
    entitlements: EntitlementStore | None = None  # None: a connection built for other commands
    organisation: OrganisationPolicy | None = None  # None: built for other commands
    identity: Identity | None = None  # who the credentials are; None: built for other commands
    qualifications: QualificationRecords | None = None  # None: built for other commands
    batches: FleetBatches | None = None  # batch results and stops; None: built for others


def banner(server: str, context: str | None) -> str:
    """Which fleet a command acts on: the line every fleet command prints first."""
    where = f"context {context}" if context else "in-cluster service account"
    return f"nodeau: fleet on Kubernetes at {server} ({where}), namespace {NAMESPACE}"


def object_name(asked: str | None, model: str) -> str:
    """``--name`` when valid, else a name made from the model's (the domain's rule)."""
    if asked is not None:
        if (problem := name_problem(asked)) is not None:
            raise SettingsError(f"--name {problem}")
        return asked
    made = name_from_model(model)
    if made is None:
        raise SettingsError(f"cannot make a workload name from {model!r}; give --name")
    return made


def admission_of(obj: WorkloadObject, objects: WorkloadObjects) -> Admission:
    """The admission in status, as ``service explain`` and ``placement explain`` read it."""
    recorded = objects.admission(obj)
    if recorded is not None:
        return recorded
    refusal = obj.refusal
    if refusal is not None:
        raise NotDecided(
            f"{obj.name} was refused ({refusal.kind.value}): {refusal.code.value}: "
            f"{refusal.sentence}; nothing was admitted"
        )
    raise NotDecided(f"{obj.name} has no recorded admission yet: the controller has not decided")


class LoopbackEndpoints(Protocol):
    """This machine's loopback endpoints of fleet workloads (user services), each routing
    to wherever its workload serves now (``apps.endpoint_services.FleetEndpoints``)."""

    def port(self, name: str) -> int | None: ...

    def start(self, name: str, allowed_origins: tuple[str, ...] = ()) -> tuple[int, str]: ...

    def stop(self, name: str, *, forget: bool = False) -> None: ...

    def origins(self, name: str) -> tuple[str, ...]:
        """The web origins ``name``'s endpoint was last started with (() if none)."""
        ...

    def running_origins(self, name: str) -> tuple[str, ...] | None:
        """The web origins ``name``'s endpoint answers while it listens; None if it does not."""
        ...


def loopback_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


class KubernetesPlane:
    """``Plane`` on a fleet on Kubernetes, through the cluster's ports; with ``endpoints``,
    ``run`` gives each service a loopback endpoint on this machine that outlives the
    machine its model serves on (a recovery moves the model, not the address)."""

    def __init__(
        self,
        cluster: FleetCluster,
        clock: Callable[[], datetime],
        endpoints: LoopbackEndpoints | None = None,
        verifier: Callable[[], EntitlementVerifier] | None = None,
        catalog: Callable[[], Catalog] = Catalog,
        models: Callable[[], ModelServices] | None = None,
        probes: Callable[[], FleetProbes] | None = None,
    ) -> None:
        self._cluster = cluster
        self._objects = cluster.objects
        self._clock = clock
        self._endpoints = endpoints
        self._verifier = verifier  # the plan's keys; None: this connection reads no plan
        self._probes = probes  # None: this connection cannot qualify a model
        self._catalog = catalog  # the curated catalog: what it lists is not imported
        self._models = models  # this machine's models; None: this command cannot read them

    @property
    def description(self) -> str:
        return banner(self._cluster.server, self._cluster.context).removeprefix("nodeau: ")

    # -- services

    def run(self, ask: RunAsk) -> RunOutcome:
        if ask.on_cpu:
            raise NotOnTheFleetYet(
                "--cpu is not on a fleet yet: its controller places a workload on a real card "
                "only where the machine's CUDA model server can use it, and on simulated cards "
                "with the CPU image; nothing was created"
            )
        if ask.allowed_origins and self._endpoints is None:
            raise NotOnTheFleetYet(
                "--allow-origin applies to a workload's loopback endpoint, which this "
                "command does not run here; nothing was created"
            )
        name = object_name(ask.name, ask.model)
        requester = self._requester()
        checked = self._checks(ask, requester)
        if checked.known and checked.refusal is not None:  # an unknown model: the controller's
            return Refused(name=name, refusal=checked.refusal)
        wanted = WorkloadAsk(
            kind=WorkloadKind.SERVICE,
            name=name,
            model=ask.model,
            task=ask.task,
            context_tokens=ask.context_tokens,
            recovery=ask.recovery,
            recovery_after=ask.recovery_after,
            requester=requester,
            unproved=ask.unproved,
        )
        created = self._ask(wanted, ask.asked or Asked(), ask.allowed_origins)
        decision = self._decision(WorkloadKind.SERVICE, name, ask.wait_s)
        if not isinstance(decision, WorkloadObject):
            return decision
        view = workload_view(decision, self._clock())
        how = None
        if self._endpoints is not None:
            kept = () if created else self._endpoints.origins(name)  # not given: as it is
            port, how = self._endpoints.start(name, ask.allowed_origins or kept)
            view = evolve(view, endpoint=loopback_url(port))
        return Started(
            workload=view,
            reserved_bytes=decision.reserved_bytes,
            source=decision.source,
            endpoint_service=how,
        )

    def _checks(self, ask: RunAsk, requester: Requester | None) -> FleetChecks:
        """The domain's checks before placement, over what the cluster says now (a
        connection built for other commands cannot read qualifications: the controller
        checks them)."""
        from nodeau.apps.planes.fleet_explain import fleet_checks
        from nodeau.domain.organisation import Organisation

        evidence = self._cluster.qualifications
        policy = self._cluster.organisation
        org = Organisation.none() if policy is None else policy.read()
        return fleet_checks(
            ask=ask,
            requester=requester,
            organisation=org,
            spent=self._spent() if org.configured else (),
            reports=self._cluster.reports.read().reports,
            proved=None if evidence is None else (self._catalog(), evidence.evidence()),
        )

    # -- who asks and the organisation's policy (apps.planes.organisation)

    def _requester(self) -> Requester | None:
        """Who the credentials are, as the API server says; None on a connection made
        without it (the controller then decides without knowing)."""
        return None if self._cluster.identity is None else self._cluster.identity.requester()

    def _policy(self) -> OrganisationPolicy:
        if self._cluster.organisation is None:
            raise NotOnTheFleetYet("this connection to the fleet was made without its policy")
        return self._cluster.organisation

    def _permit(self, action: str) -> None:
        """Nothing when the person asking may take ``action`` under the organisation's policy
        (RBAC is the API server's own check, on every request); ``NotAllowed`` otherwise."""
        from nodeau.apps.planes.organisation import permit
        from nodeau.domain.limits import Action

        requester = self._requester()
        if requester is None or self._cluster.organisation is None:
            return
        permit(self._policy().read(), requester, Action(action))

    def _spent(self) -> tuple[Spending, ...]:
        from nodeau.domain.workloads import holds_gpu

        return tuple(
            Spending(requester=o.ask.requester if o.ask is not None else None)
            for o in self._objects.list_all()
            if o.record is None or holds_gpu(o.record.workload.state)
        )

    def _who(self) -> Requester:
        """Who asks; a NotOnTheFleetYet on a connection made without it."""
        requester = self._requester()
        if requester is None:
            raise NotOnTheFleetYet("this connection to the fleet was made without who you are")
        return requester

    @cached_property
    def organisation(self) -> Organisations:
        from nodeau.apps.planes.plan import status_in_force

        return Organisations(
            plane=self.description,
            policy=self._policy,
            requester=self._who,
            terms=lambda: status_in_force(*self._entitlements(), self._clock()).terms,
            spent=self._spent,
        )

    def explain_run(self, ask: RunAsk) -> Explanation:
        from nodeau.apps.planes.fleet_explain import explain_on_fleet

        requester = self._who()
        self._policy()  # a connection made without the policy says so
        return explain_on_fleet(
            plane=self.description, ask=ask, user=requester.user, found=self._checks(ask, requester)
        )

    def _ask(self, wanted: WorkloadAsk, asked: Asked, origins: tuple[str, ...]) -> bool:
        """Create the object (True); an existing one with the same model gets its endpoint
        back (False), when every flag given is as it is (``domain.runs.differences``)."""
        if self._objects.create(wanted):
            return True
        existing = self._objects.get(wanted.kind, wanted.name)
        if existing is None or existing.deleting:
            raise StateError(f"{wanted.name} is being deleted; try again in a moment")
        if existing.spec.get("model") != wanted.model:
            raise StateError(
                f"{wanted.name} already exists, serving {existing.spec.get('model')!r}; "
                f"give another --name or remove it with nodeau stop {wanted.name} --workload"
            )
        now = self._runs_with(existing)
        differs = None if now is None else differences(wanted.name, asked, origins, now)
        if differs is not None:
            raise StateError(differs)
        if existing.spec.get("endpoint") == "stopped":
            self._objects.want_endpoint(wanted.kind, wanted.name, serving=True)
        return False

    def _runs_with(self, obj: WorkloadObject) -> RunsWith | None:
        """What ``obj`` runs with: its spec, the context its record runs once decided, and
        its loopback endpoint's origins while that listens here; None: its spec does not
        read."""
        if obj.ask is None:
            return None
        context = obj.ask.context_tokens
        if obj.record is not None:
            context = obj.record.config.context_tokens
        mode, after = choice_of(obj)
        here = self._endpoints
        return RunsWith(
            context_tokens=context,
            task=obj.ask.task,
            recovery=mode,
            recovery_after=after,
            allowed_origins=None if here is None else here.running_origins(obj.name),
        )

    def _decision(
        self, kind: WorkloadKind, name: str, wait_s: float
    ) -> WorkloadObject | Refused | Undecided:
        deadline = time.monotonic() + wait_s
        while True:
            obj = self._objects.get(kind, name)
            if obj is None:
                raise StateError(f"{name} was deleted before the controller decided")
            if obj.decided:  # the port's one answer: the controller wrote its state
                break
            if time.monotonic() >= deadline:
                return Undecided(name=name, waited_s=wait_s)
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
        refusal = obj.refusal
        if refusal is not None:
            self._objects.delete(kind, name)  # a refusal creates nothing
            return Refused(name=name, refusal=refusal)
        return obj

    def workloads(self) -> tuple[WorkloadView, ...]:
        """Every workload but those that have ended, as on one machine: a batch job that
        has finished is ``nodeau batch status``'s, not ``ps``'s (one refused stays: on
        the fleet its object is there until someone deletes it, and ps says why)."""
        now = self._clock()
        return tuple(
            self._local(o, workload_view(o, now))
            for o in self._objects.list_all()
            if o.record is None or holds_gpu(o.record.workload.state)
        )

    def _local(self, obj: WorkloadObject, view: WorkloadView) -> WorkloadView:
        """The view with this machine's loopback endpoint for it, when it has one and its
        endpoint is not stopped: the address a client keeps, wherever the model serves."""
        if self._endpoints is None or endpoint_off(obj):
            return view
        port = self._endpoints.port(view.name)
        return view if port is None else evolve(view, endpoint=loopback_url(port))

    def _find(self, name: str) -> WorkloadObject:
        return find_workload(self._objects, name)

    def stop(self, name: str, *, workload: bool) -> str:
        self._permit("stop")
        obj = self._find(name)
        gpu = obj.gpu_uuid
        if workload:
            self._objects.delete(obj.kind, name)
            if self._endpoints is not None:
                self._endpoints.stop(name, forget=True)
            frees = f"frees {gpu}" if gpu else "releases whatever it held"
            return (
                f"{name}: {KIND_NAMES[obj.kind]} deleted; the controller stops its model "
                f"server and {frees}"
            )
        if obj.kind is WorkloadKind.BATCH:
            return (
                f"{name} is a batch job: it has no endpoint to stop "
                "(nodeau stop NAME --workload stops it and frees its card)"
            )
        self._objects.want_endpoint(obj.kind, name, serving=False)
        if self._endpoints is not None:
            self._endpoints.stop(name)
        return (
            f"{name}: endpoint stopped; the model stays loaded (nodeau run starts it again "
            "at once; --workload frees the card)"
        )

    def admission(self, name: str) -> Admission:
        return admission_of(self._find(name), self._objects)

    def runtime_estimate(self, name: str) -> str | None:
        return None  # the model server is a Pod's: nothing here to ask

    @cached_property
    def qualification(self) -> FleetQualification:
        return FleetQualification(
            objects=self._objects,
            reports=self._cluster.reports,
            pods=self._cluster.pods,
            records=self._qualifications,
            decision=self._decision,
            clock=self._clock,
            probes=self._probes,
            runtime=f"llama-server (the fleet's model-server image {self._cluster.server_image})",
            catalog=self._catalog,
            models=self._models,
        )

    def _qualifications(self) -> QualificationRecords:
        if self._cluster.qualifications is None:
            raise QualificationUnavailable(
                "this connection to the fleet keeps no qualification evidence; "
                "nodeau model qualify and model info need the CLI's own connection"
            )
        return self._cluster.qualifications

    def logs(self, name: str, lines: int) -> tuple[str, ...]:
        """The last lines of the workload's model server log: its Pod's container's (the
        run that ended while the kubelet waits to restart it)."""
        obj = self._find(name)
        found = self._cluster.pods.log_tail(obj.kind, name, lines)
        if found is None:
            state = obj.state or PENDING
            raise LogsUnavailable(
                f"{name} has no model server on the fleet now ({state}): no log to show; "
                "nodeau ps says what happens next"
            )
        return found

    def follow_logs(self, name: str, lines: int) -> Iterator[str]:
        self._find(name)
        raise LogsUnavailable(
            f"following {name}'s log is not available on a fleet on Kubernetes yet: "
            f"nodeau logs {name} shows its last lines (kubectl logs -f -n nodeau-system "
            "follows its Pod's)"
        )

    # -- recovery (apps.recovery)

    @cached_property
    def recovery(self) -> FleetRecovery:
        c = self._cluster
        return FleetRecovery(
            plane=self.description,
            objects=c.objects,
            marks=c.marks,
            reports=c.reports,
            control_plane_label=c.control_plane_label,
            clock=self._clock,
            permit=self._permit,
        )

    # -- machines and marks (apps.machines)

    @cached_property
    def machines(self) -> FleetMachines:
        c = self._cluster
        return FleetMachines(
            plane=self.description,
            marks=c.marks,
            reports=c.reports,
            health=c.health,
            ledger=c.ledger,
            clock=self._clock,
            permit=self._permit,
        )

    # -- batch jobs (apps.batches)

    @cached_property
    def batches(self) -> FleetBatchJobs:
        return FleetBatchJobs(
            objects=self._objects,
            results=self._fleet_batches,
            requester=self._requester,
            decision=self._decision,
            clock=self._clock,
            permit=self._permit,
        )

    def _fleet_batches(self) -> FleetBatches:
        if self._cluster.batches is None:
            raise NotOnTheFleetYet("this connection to the fleet was made without batch results")
        return self._cluster.batches

    # -- copies (apps.copies)

    def _copy_requests(self) -> ModelCopies:
        if self._cluster.copies is None:
            raise NotOnTheFleetYet("this connection to the fleet was made without copy requests")
        return self._cluster.copies

    @cached_property
    def copies(self) -> FleetCopies:
        c = self._cluster
        return FleetCopies(
            plane=self.description,
            requests=self._copy_requests,
            marks=c.marks,
            reports=c.reports,
            clock=self._clock,
        )

    # -- this machine's and every machine's model files

    def model_status(self) -> tuple[StatusRow, ...]:
        """Every machine's copies as its agent reports them; this machine's own cache too
        when it is no machine of the fleet (a laptop that reaches the cluster)."""
        from nodeau.apps.planes.status_rows import fleet_status_rows, status_rows

        reports = self._cluster.reports.read().reports
        rows = fleet_status_rows(reports)
        if self._models is None:
            return rows
        m = self._models()
        if any(r.machine == m.settings.machine for r in reports):
            return rows
        here = status_rows(m.store.files(), m.registry.book(), m.catalog(), m.settings.machine)
        return rows + here

    # -- plan (apps.planes.plan): the entitlement is kept in ConfigMap nodeau-entitlement

    def _entitlements(self) -> tuple[EntitlementStore, EntitlementVerifier]:
        if self._cluster.entitlements is None or self._verifier is None:
            raise NotOnTheFleetYet("this connection to the fleet was made without its plan")
        return self._cluster.entitlements, self._verifier()

    @cached_property
    def plans(self) -> Plans:
        return Plans(
            plane=self.description,
            entitlements=self._entitlements,
            clock=self._clock,
            permit=self._permit,
        )
