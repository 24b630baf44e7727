"""``ServingCommands`` on a fleet: the domain's checks asked over what the cluster says, then
a GPUService asks, the controller decides and places it, and this machine's loopback
endpoint follows the model wherever it serves.

Why it is so: docs/adr/decisions/apps-planes.md (apps/serving/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from attrs import evolve, frozen

from nodeau.apps.models.actions import UnknownModel
from nodeau.apps.planes.fleet_workloads import PENDING, endpoint_off, find_workload, workload_view
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.qualification.fleet import fleet_model
from nodeau.apps.recovery.fleet import choice_of
from nodeau.apps.serving.commands import (
    CheckView,
    Explanation,
    LogsUnavailable,
    Refused,
    RunAsk,
    RunOutcome,
    Started,
    Undecided,
    check_view,
    workload_name,
)
from nodeau.domain.artifacts import Sha256
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.catalog import Catalog, catalog_claims
from nodeau.domain.decision import PLACEMENT, AskFacts, Checked, checks, first_refusal
from nodeau.domain.fleet_reports import MachineReport
from nodeau.domain.limits import RequestShape
from nodeau.domain.model_info import runtime_config
from nodeau.domain.organisation import Organisation, Requester, Spending
from nodeau.domain.qualification import EvidenceBook, task_refusal
from nodeau.domain.records import Admission
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.runs import Asked, RunsWith, differences
from nodeau.domain.workloads import WorkloadKind, holds_gpu
from nodeau.ports.cluster import ServerPods
from nodeau.ports.endpoints import FleetLoopbackEndpoints
from nodeau.ports.errors import NodeauError
from nodeau.ports.organisation import OrganisationPolicy
from nodeau.ports.state import StateError
from nodeau.ports.workload_objects import WorkloadObject, WorkloadObjects

KIND_NAMES = {WorkloadKind.SERVICE: "GPUService", WorkloadKind.BATCH: "BatchJob"}

Decision = Callable[[WorkloadKind, str, float], "WorkloadObject | Refused | Undecided"]


class NotDecided(StateError):
    """The object has no recorded admission (not decided yet, or refused)."""


class NotOnTheFleetYet(NodeauError):
    """Something the one-machine plane does that the fleet does not do yet."""


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


def loopback_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


@frozen(kw_only=True)
class FleetServing:
    """``ServingCommands`` where the plane is a fleet on Kubernetes; with ``endpoints``,
    ``run`` gives each service a loopback endpoint on this machine that outlives the
    machine its model serves on (a recovery moves the model, not the address).
    ``checks`` are the domain's checks before placement over what the cluster says now,
    ``decision`` waits for the controller's."""

    _plane: str
    _objects: WorkloadObjects
    _pods: ServerPods
    _endpoints: FleetLoopbackEndpoints | None
    _requester: Callable[[], Requester | None]
    _who: Callable[[], Requester]  # who asks; raises on a connection made without it
    _policy: Callable[[], OrganisationPolicy]  # raises on a connection made without it
    _checks: Callable[[RunAsk, Requester | None], FleetChecks]
    _decision: Decision
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

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
        name = workload_name(ask.name, ask.model)
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

    def explain(self, ask: RunAsk) -> Explanation:
        requester = self._who()
        self._policy()  # a connection made without the policy says so
        return explain_on_fleet(
            plane=self._plane, ask=ask, user=requester.user, found=self._checks(ask, requester)
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

    def stop(self, name: str, *, workload: bool) -> str:
        self._permit("stop")
        obj = find_workload(self._objects, name)
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
        return admission_of(find_workload(self._objects, name), self._objects)

    def runtime_estimate(self, name: str) -> str | None:
        return None  # the model server is a Pod's: nothing here to ask

    def logs(self, name: str, lines: int) -> tuple[str, ...]:
        """The last lines of the workload's model server log: its Pod's container's (the
        run that ended while the kubelet waits to restart it)."""
        obj = find_workload(self._objects, name)
        found = self._pods.log_tail(obj.kind, name, lines)
        if found is None:
            state = obj.state or PENDING
            raise LogsUnavailable(
                f"{name} has no model server on the fleet now ({state}): no log to show; "
                "nodeau ps says what happens next"
            )
        return found

    def follow_logs(self, name: str, lines: int) -> Iterator[str]:
        find_workload(self._objects, name)
        raise LogsUnavailable(
            f"following {name}'s log is not available on a fleet on Kubernetes yet: "
            f"nodeau logs {name} shows its last lines (kubectl logs -f -n nodeau-system "
            "follows its Pod's)"
        )


PLACED = (
    "the controller places it when asked: the cards' memory, the plan's bounds and the "
    "machines drained or unreachable then decide (nodeau run waits for its answer)"
)


@frozen(kw_only=True)
class FleetChecks:
    """The model as a person reads it, and the checks made before placement, in order."""

    model: str
    checked: tuple[Checked, ...]
    known: bool  # some machine holds the model verified (else the controller refuses it)

    @property
    def refusal(self) -> Refusal | None:
        return first_refusal(self.checked)


def fleet_checks(
    *,
    ask: RunAsk,
    requester: Requester | None,
    organisation: Organisation,
    spent: Iterable[Spending],
    reports: tuple[MachineReport, ...],
    proved: tuple[Catalog, EvidenceBook] | None,
) -> FleetChecks:
    """The checks made before placement, in the domain's one order (``proved``: the catalog
    and the evidence kept in the cluster; None when this connection cannot read them, and
    the controller checks qualification alone)."""
    try:
        found = fleet_model(ask.model, reports)
    except UnknownModel as exc:
        missing = Refusal.of(ReasonCode.NO_VERIFIED_COPY, exc.one_line())
        return FleetChecks(
            model=ask.model, checked=(Checked.refused(missing.kind.value, missing),), known=False
        )
    config = runtime_config(found.summary, ask.task, ask.context_tokens)
    qualification = None
    if proved is not None and not ask.unproved:
        catalog, book = proved
        qualification = task_refusal(
            catalog=catalog_claims(catalog, found.artifact),
            evidence=book.for_artifact(Sha256(hex=found.artifact)),
            task=ask.task,
            model=found.name,
        )
    asked = AskFacts(
        shape=RequestShape(
            model=found.name,
            artifact_id=found.artifact,
            context_tokens=config.context_tokens,
            model_bytes=max(found.size_bytes, 1),
        ),
        task=ask.task,
        qualification=qualification,
        unproved=ask.unproved or proved is None,
        organisation=organisation,
        requester=requester,
    )
    return FleetChecks(model=found.name, checked=tuple(checks(asked, spent, None)), known=True)


def explain_on_fleet(*, plane: str, ask: RunAsk, user: str, found: FleetChecks) -> Explanation:
    """Whether ``ask`` passes the checks made before placement, and the first that refuses."""
    refusal = found.refusal
    views = [check_view(c) for c in found.checked]
    if refusal is None:
        views.append(CheckView(check=PLACEMENT, passed=True, sentence=PLACED, code=None))
    return Explanation(
        plane=plane,
        user=user,
        model=found.model,
        context_tokens=ask.context_tokens,
        admitted=refusal is None,
        refusal=refusal,
        checks=tuple(views),
    )
