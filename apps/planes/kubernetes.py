"""The fleet on Kubernetes as a ``Plane``: the CLI asks with objects, the controller decides.

Why it is so: docs/adr/decisions/apps-planes.md (kubernetes.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps.batches.fleet import FleetBatchJobs
from nodeau.apps.copies.fleet import FleetCopies
from nodeau.apps.machines.fleet import FleetMachines
from nodeau.apps.organisation.policy import Organisations, permit
from nodeau.apps.planes.status_rows import fleet_status_rows, status_rows
from nodeau.apps.plans.entitlement import Plans, status_in_force
from nodeau.apps.qualification.commands import QualificationUnavailable
from nodeau.apps.qualification.fleet import FleetProbes, FleetQualification
from nodeau.apps.recovery.fleet import FleetRecovery
from nodeau.apps.serving.commands import Refused, RunAsk, Undecided
from nodeau.apps.serving.fleet import FleetServing, NotOnTheFleetYet, fleet_checks
from nodeau.domain.catalog import Catalog
from nodeau.domain.limits import Action
from nodeau.domain.organisation import Organisation, Requester, Spending
from nodeau.domain.workloads import WorkloadKind, holds_gpu
from nodeau.ports.batches import FleetBatches
from nodeau.ports.cluster import (
    FleetMarks,
    HealthRecords,
    MachineReports,
    ModelCopies,
    QualificationRecords,
    ReservationLedger,
    ServerPods,
)
from nodeau.ports.endpoints import FleetLoopbackEndpoints
from nodeau.ports.entitlements import EntitlementStore, EntitlementVerifier
from nodeau.ports.join_tokens import BootstrapTokens
from nodeau.ports.organisation import Identity, OrganisationPolicy
from nodeau.ports.state import StateError
from nodeau.ports.workload_objects import WorkloadObject, WorkloadObjects

if TYPE_CHECKING:
    from nodeau.apps.models.services import ModelServices
    from nodeau.apps.planes.status_rows import StatusRow
    from nodeau.apps.serving.fleet import FleetChecks

POLL_S = 0.2
NAMESPACE = "nodeau-system"


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


class KubernetesPlane:
    """``Plane`` on a fleet on Kubernetes, through the cluster's ports; with ``endpoints``,
    ``run`` gives each service a loopback endpoint on this machine that outlives the
    machine its model serves on (a recovery moves the model, not the address)."""

    def __init__(
        self,
        cluster: FleetCluster,
        clock: Callable[[], datetime],
        endpoints: FleetLoopbackEndpoints | None = None,
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

    # -- services (apps.serving)

    @cached_property
    def serving(self) -> FleetServing:
        return FleetServing(
            plane=self.description,
            objects=self._objects,
            pods=self._cluster.pods,
            endpoints=self._endpoints,
            requester=self._requester,
            who=self._who,
            policy=self._policy,
            checks=self._checks,
            decision=self._decision,
            clock=self._clock,
            permit=self._permit,
        )

    def _checks(self, ask: RunAsk, requester: Requester | None) -> FleetChecks:
        """The domain's checks before placement, over what the cluster says now (a
        connection built for other commands cannot read qualifications: the controller
        checks them)."""
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

    # -- who asks and the organisation's policy (apps.organisation)

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
        requester = self._requester()
        if requester is None or self._cluster.organisation is None:
            return
        permit(self._policy().read(), requester, Action(action))

    def _spent(self) -> tuple[Spending, ...]:

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
        return Organisations(
            plane=self.description,
            policy=self._policy,
            requester=self._who,
            terms=lambda: status_in_force(*self._entitlements(), self._clock()).terms,
            spent=self._spent,
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
        reports = self._cluster.reports.read().reports
        rows = fleet_status_rows(reports)
        if self._models is None:
            return rows
        m = self._models()
        if any(r.machine == m.settings.machine for r in reports):
            return rows
        here = status_rows(m.store.files(), m.registry.book(), m.catalog(), m.settings.machine)
        return rows + here

    # -- plan (apps.plans): the entitlement is kept in ConfigMap nodeau-entitlement

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
