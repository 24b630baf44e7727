"""A fleet's admission of one GPUService or BatchJob: its model resolved among the machines'
verified copies, what admission and placement read of the fleet (``planning``), and the
``decide(snapshot)`` the store runs inside its write (``decider``). No I/O: the controller
reads the reports, marks and ledger and hands them here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from datetime import datetime

from attrs import evolve, field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.allowances import Allowances
from nodeau.domain.artifacts import Sha256
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.catalog import Catalog, catalog_claims
from nodeau.domain.decision import AskFacts
from nodeau.domain.decision import decide as domain_decide
from nodeau.domain.fleet_reports import MachineReport, MarkedFleet
from nodeau.domain.free_cards import FreeCards
from nodeau.domain.hardware import Fleet, merge_reports
from nodeau.domain.health import MachineHealth
from nodeau.domain.limits import RequestShape
from nodeau.domain.memory import MeasuredTable, Prediction, predictor
from nodeau.domain.model_info import ModelSummary, runtime_config
from nodeau.domain.model_server import server_exclusions
from nodeau.domain.organisation import Organisation, Spending, check_shape
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import PlanTerms
from nodeau.domain.qualification import EvidenceBook, task_refusal
from nodeau.domain.records import Admission, Snapshot, spending
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.resolution import (
    MIN_PREFIX,
    Known,
    Miss,
    Resolution,
    Unresolved,
    display_name,
    resolve_name,
)
from nodeau.domain.scheduling import FleetView, exclusions, scheduled_admission
from nodeau.domain.split_placement import SplitAsk
from nodeau.domain.workloads import WorkloadKind

Decide = Callable[[Snapshot], Result[Admission, Refusal]]


@frozen(kw_only=True)
class FleetResolution:
    """The artifact a model text names, and where verified copies of it are."""

    artifact_id: str
    names: tuple[str, ...]
    size_bytes: int
    summary: ModelSummary
    paths: tuple[tuple[str, str], ...]  # (machine, path of its verified copy), by machine
    # the machines holding a copy, and each one's path, made once (a fleet of thousands)
    on: frozenset[str] = field(init=False, eq=False, repr=False)
    _path: dict[str, str] = field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_path", dict(self.paths))
        object.__setattr__(self, "on", frozenset(self._path))

    def path_on(self, machine: str) -> str:
        return self._path[machine]

    def display_name(self, asked: str) -> str:
        """The name a person reads in ps (the domain's ``display_name``)."""
        return display_name(asked, self.names, self.artifact_id)


def resolve(text: str, reports: Iterable[MachineReport]) -> Result[FleetResolution, Refusal]:
    """The one artifact ``text`` names among the machines' verified artifacts."""
    held = [(rep.reading.machine, a) for rep in reports for a in rep.artifacts]
    known = [Known(artifact_id=a.id.lower(), names=a.names, where=m) for m, a in held]
    match resolve_name(text, known):
        case Unresolved(miss=Miss.UNKNOWN):
            return Failure(
                Refusal.of(
                    ReasonCode.NO_VERIFIED_COPY,
                    f"{text}: no machine in the fleet holds a verified copy of a model by that "
                    f"name or id (at least {MIN_PREFIX} hex digits); pull or import it on a "
                    "machine, then run it",
                )
            )
        case Unresolved() as missed:
            return Failure(Refusal.of(ReasonCode.NO_VERIFIED_COPY, missed.sentence))
        case Resolution() as found:
            copies = sorted(
                ((m, a) for m, a in held if a.id.lower() == found.artifact_id), key=lambda c: c[0]
            )
            first = copies[0][1]
            return Success(
                FleetResolution(
                    artifact_id=first.id,
                    names=found.names,
                    size_bytes=first.size_bytes,
                    summary=first.summary,
                    paths=tuple(dict((m, a.path) for m, a in copies).items()),
                )
            )
    raise AssertionError("resolve_name answers a Resolution or an Unresolved")


@frozen(kw_only=True)
class Proved:
    """What the fleet counts as proved: the curated catalog's claims and the evidence of
    every qualification kept in the cluster."""

    catalog: Catalog
    evidence: EvidenceBook


def unproved_refusal(
    ask: WorkloadAsk, resolution: FleetResolution, proved: Proved | None
) -> Refusal | None:
    """Why ``ask`` may not be served for its task (the domain's ``task_refusal`` over the
    artifact resolved), or None: a service or batch job served unproved on purpose, or
    nothing to check against (``proved`` None)."""
    if proved is None or ask.unproved:
        return None
    artifact = resolution.artifact_id.lower()
    return task_refusal(
        catalog=catalog_claims(proved.catalog, artifact),
        evidence=proved.evidence.for_artifact(Sha256(hex=artifact)),
        task=ask.task,
        model=resolution.display_name(ask.model),
    )


def fleet_of(reports: Iterable[MachineReport], marks: MarkedFleet) -> Fleet:
    """The fleet the reports of the cluster's Nodes describe (control plane from the marks)."""
    nodes = frozenset(marks.nodes)
    return merge_reports(
        rep.as_agent_report(control_plane=rep.reading.machine in marks.control_plane)
        for rep in reports
        if rep.reading.machine in nodes
    )


@frozen(kw_only=True)
class Planning:
    """Everything but the ledger that admission and placement read for one ask."""

    request: AdmissionRequest
    resolution: FleetResolution
    fleet: Fleet
    excluded: tuple[tuple[str, str], ...]
    settings: SchedulingSettings
    predict: Callable[[str], Prediction]
    plan: PlanTerms
    shape: RequestShape  # what the organisation's limits and quotas read of the request
    qualification: Refusal | None = None  # the task's refusal (None: proved, or unchecked)
    # the batch's free cards' index of this fleet brought to a ledger (None: none kept)
    cards: Callable[[Ledger], FreeCards] | None = None
    # what a split across cards of one machine is worked out from (None: never split)
    split: SplitAsk | None = None

    def view(self, ledger: Ledger) -> FleetView:
        """The fleet as a placement sees it, over this ledger."""
        return FleetView(
            fleet=self.fleet,
            ledger=ledger,
            settings=self.settings,
            excluded=self.excluded,
            verified_on=self.resolution.on,
            predict=self.predict,
            plan=self.plan,
            cards=None if self.cards is None else self.cards(ledger),
            split=self.split,
        )

    def admission(
        self, ask: WorkloadAsk, ledger: Ledger, now: datetime
    ) -> Result[Admission, Refusal]:
        """The domain's admission and placement of ``ask`` over this ledger."""
        return scheduled_admission(
            self.request,
            self.view(ledger),
            kind=ask.kind,
            recovery=ask.recovery,
            recovery_after=ask.recovery_after,
            model_path=self.resolution.path_on,
            now=now,
        )


def planning(
    ask: WorkloadAsk,
    *,
    reports: tuple[MachineReport, ...],
    marks: MarkedFleet,
    health: Mapping[str, MachineHealth],
    plan: PlanTerms,
    organisation: Organisation | None = None,
    table: MeasuredTable | None = None,
    allowances: Allowances | None = None,
    fleet: Fleet | None = None,
    proved: Proved | None = None,
    cards: Callable[[Ledger], FreeCards] | None = None,
    cuda_image: bool = False,
) -> Result[Planning, Refusal]:
    """What admission and placement read for ``ask``, or why nothing can be decided
    (``fleet``: ``fleet_of(reports, marks)`` when the caller made it already; ``proved``:
    what a new service's task is checked against, None for no check; ``cuda_image``: a
    CUDA model-server image is configured, without which no real card is placed on)."""
    fleet = fleet if fleet is not None else fleet_of(reports, marks)
    in_fleet = frozenset(m.name for m in fleet.machines)
    on_nodes = tuple(rep for rep in reports if rep.reading.machine in in_fleet)
    match resolve(ask.model, on_nodes):
        case Success(FleetResolution() as resolution):
            pass
        case Failure(Refusal() as refusal):
            return Failure(refusal)
    config = runtime_config(resolution.summary, ask.task, ask.context_tokens)
    org = organisation or Organisation.none()
    shape = RequestShape(
        model=resolution.display_name(ask.model),
        artifact_id=resolution.artifact_id,
        context_tokens=config.context_tokens,
        model_bytes=resolution.size_bytes,
    )
    predict = predictor(
        arch=resolution.summary.architecture,
        artifact_id=resolution.artifact_id,
        artifact_bytes=resolution.size_bytes,
        config=config,
        table=table or MeasuredTable(),
        allowances=allowances or Allowances(),
    )
    excluded = exclusions(
        machines=(m.name for m in fleet.machines),
        drained=marks.drained,
        health={m: h.state for m, h in health.items()},
        limits=org.limits,
    )
    servers = {rep.reading.machine: rep.server for rep in on_nodes if rep.server is not None}
    out = {m for m, _ in excluded}
    excluded += tuple(
        (m, why)
        for m, why in server_exclusions(fleet.machines, servers, cuda_image=cuda_image)
        if m not in out
    )
    request = AdmissionRequest(
        workload=ask.name,
        model=resolution.display_name(ask.model),
        artifact_id=resolution.artifact_id,
        config=config,
        names=resolution.names,
    )
    return Success(
        Planning(
            request=request,
            resolution=resolution,
            fleet=fleet,
            excluded=excluded,
            settings=marks.settings,
            predict=predict,
            plan=plan,
            shape=shape,
            qualification=unproved_refusal(ask, resolution, proved),
            cards=cards,
            split=None
            if resolution.summary.layers is None
            else SplitAsk(
                arch=resolution.summary.architecture,
                weights=resolution.summary.layers,
                config=config,
                allowances=allowances or Allowances(),
            ),
        )
    )


def still_permitted(
    found: Planning, organisation: Organisation | None
) -> Result[Planning, Refusal]:
    """``found``, when the organisation's limits still permit its shape: a workload that
    holds cards already is moved or copied only then (who asked was checked at admission)."""
    return check_shape(organisation or Organisation.none(), found.shape).map(lambda _: found)


# what a planning reads of an ask besides its name: asks alike share one planning
PlanKey = tuple[WorkloadKind, str, str, int | None, bool]


def plan_key(ask: WorkloadAsk) -> PlanKey:
    """The ask's shape as ``planning`` reads it (its name aside)."""
    return (ask.kind, ask.model, ask.task.value, ask.context_tokens, ask.unproved)


def decider(
    ask: WorkloadAsk,
    *,
    reports: tuple[MachineReport, ...],
    marks: MarkedFleet,
    health: Mapping[str, MachineHealth],
    now: datetime,
    plan: PlanTerms,
    organisation: Organisation | None = None,
    table: MeasuredTable | None = None,
    allowances: Allowances | None = None,
    proved: Proved | None = None,
    spent: Iterable[Spending] | None = None,
    fleet: Fleet | None = None,
    cards: Callable[[Ledger], FreeCards] | None = None,
    plans: MutableMapping[PlanKey, Result[Planning, Refusal]] | None = None,
    cuda_image: bool = False,
) -> Decide:
    """The ``decide(snapshot)`` that ``StateStore.admit`` runs for one object (``spent``:
    what the workloads holding a card spend, when the snapshot carries no records;
    ``fleet`` and ``cards``: the batch's fleet and its free cards' index, kept for every
    decision of a reconcile pass; ``plans``: the batch's plannings by the ask's shape,
    ``plan_key``, so that asks alike are planned once over the same inputs)."""
    key = plan_key(ask)
    found = None if plans is None else plans.get(key)
    if found is None:
        found = planning(
            ask,
            reports=reports,
            marks=marks,
            health=health,
            plan=plan,
            organisation=organisation,
            table=table,
            allowances=allowances,
            fleet=fleet,
            proved=proved,
            cards=cards,
            cuda_image=cuda_image,
        )
        if plans is not None:
            plans[key] = found
    match found:
        case Success(Planning() as shared):
            planned = evolve(shared, request=evolve(shared.request, workload=ask.name))
            org = organisation or Organisation.none()
            counted = None if spent is None else tuple(spent)

            asked = AskFacts(
                shape=planned.shape,
                task=ask.task,
                qualification=planned.qualification,
                unproved=ask.unproved,
                organisation=org,
                requester=ask.requester,
            )

            def decide(snapshot: Snapshot) -> Result[Admission, Refusal]:
                spends = counted if counted is not None else spending(snapshot.workloads)

                def place() -> Result[Admission, Refusal]:
                    admitted = planned.admission(ask, snapshot.ledger, now)
                    return admitted.map(
                        lambda a: evolve(a, record=evolve(a.record, requester=ask.requester))
                    )

                return domain_decide(asked, spends, place)

            return decide
        case Failure(Refusal() as refusal):
            return lambda _snapshot: Failure(refusal)
    raise AssertionError("planning answers a Result")
