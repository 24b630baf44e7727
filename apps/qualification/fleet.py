"""``QualificationCommands`` on a fleet: a GPUService per task, probed from this command,
its evidence kept in the cluster for every machine's admission to read; ``model info`` from
what the machines' reports and the cluster know of a model.

Why it is so: docs/adr/decisions/apps-planes.md (apps/qualification/).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from datetime import datetime

from attrs import frozen

from nodeau.apps.models.actions import (
    UnknownModel,
    known_here,
    model_description,
    resolve_model,
    verified_summary,
)
from nodeau.apps.models.services import ModelServices
from nodeau.apps.qualification.commands import (
    THIS_MACHINE,
    ModelInfoView,
    Probe,
    QualificationUnavailable,
    QualificationView,
    info_view,
    not_started,
    qualification_view,
    unread_view,
)
from nodeau.apps.serving.commands import Refused, Undecided
from nodeau.domain.allowances import Allowances
from nodeau.domain.artifacts import Sha256
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.catalog import Catalog, catalog_claims
from nodeau.domain.fleet_reports import MachineReport
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.qualification import (
    MemoryReading,
    MemorySource,
    QualificationEvidence,
    capability_states,
    card_measurements,
    qualification_plan,
    qualified_line,
)
from nodeau.domain.resolution import Known, Miss, Resolution, Unresolved, display_name, resolve_name
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.cluster import MachineReports, QualificationRecords, ServerPods
from nodeau.ports.errors import NodeauError
from nodeau.ports.state import StateError
from nodeau.ports.workload_objects import WorkloadObject, WorkloadObjects


@frozen(kw_only=True)
class FleetProbes:
    """How this command probes a model server the fleet runs: each capability's probe,
    and whether the server answers its health check yet."""

    probe: Probe
    healthy: Callable[[str], bool]


@frozen(kw_only=True)
class FleetQualification:
    """``QualificationCommands`` where the plane is a fleet; ``records`` is the evidence
    port (raising when this connection has none), ``runtime`` names the fleet's server."""

    _objects: WorkloadObjects
    _reports: MachineReports
    _pods: ServerPods
    _records: Callable[[], QualificationRecords]
    _decision: Decide
    _clock: Callable[[], datetime]
    _probes: Callable[[], FleetProbes] | None  # None: this connection cannot probe
    _runtime: str
    _catalog: Callable[[], Catalog]
    _models: Callable[[], ModelServices] | None  # None: this command cannot read them

    def qualify(
        self, model: str, context_tokens: int | None, seed: int | None = None
    ) -> QualificationView | Refused:
        if self._probes is None:
            raise QualificationUnavailable(
                "this connection to the fleet cannot probe a model; nodeau model qualify "
                "needs the CLI's own connection"
            )
        probes = self._probes()
        records = self._records()
        drawn = seed if seed is not None else random.SystemRandom().randrange(2**32)
        done = qualify_on_fleet(
            objects=self._objects,
            reports=lambda: self._reports.read().reports,
            records=records,
            pods=self._pods,
            decide=self._decision,
            clock=self._clock,
            probe=probes.probe,
            healthy=probes.healthy,
            runtime=self._runtime,
            model=model,
            context_tokens=context_tokens,
            seed=drawn,
        )
        if isinstance(done, Refused):
            return done
        shown = fleet_model(model, self._reports.read().reports).name
        return qualification_view(shown, done)

    def info(self, model: str) -> ModelInfoView:
        return fleet_model_info(
            model,
            reports=self._reports.read().reports,
            records=self._records(),
            catalog=self._catalog(),
            here=None if self._models is None else self._models(),
        )


class _Named:
    """The artifact a typed name means on the fleet, and what was found of it."""

    def __init__(self, artifact: str, model: str, names: tuple[str, ...], size_bytes: int) -> None:
        self.artifact = artifact
        self.model = model
        self.names = names
        self.size_bytes = size_bytes


def _named(
    text: str,
    reports: tuple[MachineReport, ...],
    catalog: Catalog,
    here: ModelServices | None,
) -> tuple[_Named, FleetModel | None]:
    try:
        found = fleet_model(text, reports)
    except AmbiguousModel:
        raise  # the fleet's machines disagree: this machine's name would be a guess
    except UnknownModel as missed:
        if here is None:
            raise
        try:
            local = resolve_model(text, here.registry.book(), catalog, here.store.files())
        except UnknownModel:
            raise UnknownModel(f"{missed}, nor among this machine's") from None
        named = _Named(
            local.artifact.id.hex, local.display_name, local.names, local.artifact.size_bytes
        )
        return named, None
    return _Named(found.artifact, found.name, found.names, found.size_bytes), found


def _local_summary(
    artifact: str, catalog: Catalog, here: ModelServices | None
) -> ModelSummary | None:
    """What this machine's verified copy of the artifact declares; None when it holds none.
    A single-file artifact's id is its file's SHA-256, known here or not."""
    if here is None:
        return None
    known = known_here(here.registry.book(), catalog).get(Sha256(hex=artifact))
    first = Sha256(hex=artifact) if known is None else known.files[0].sha256
    return verified_summary(first, here.store, here.inspector)


def fleet_model_info(
    text: str,
    *,
    reports: tuple[MachineReport, ...],
    records: QualificationRecords,
    catalog: Catalog,
    here: ModelServices | None,
) -> ModelInfoView:
    """``nodeau model info TEXT`` on the fleet (``here``: this machine's models, None when
    this command has no access to them)."""
    named, on_fleet = _named(text, reports, catalog, here)
    evidence = records.evidence().for_artifact(Sha256(hex=named.artifact))
    table = records.measurements()
    claims = catalog_claims(catalog, named.artifact)
    summary = _local_summary(named.artifact, catalog, here)
    source, note = THIS_MACHINE, None
    if summary is None and on_fleet is not None:
        summary = on_fleet.summary
        source = f"{on_fleet.machine}'s verified copy (its agent's report)"
        note = (
            f"this machine holds no verified copy of {named.model}: its architecture values "
            f"are those {on_fleet.machine} read from its own and reported"
        )
    if summary is None:
        return unread_view(
            model=named.model,
            names=named.names,
            artifact_id=named.artifact,
            size_bytes=named.size_bytes,
            table=table,
            capabilities=capability_states(evidence, claims),
            qualified=None if evidence is None else qualified_line(evidence),
            note=(
                f"neither this machine nor any machine of the fleet holds a verified copy of "
                f"{named.model}, so its architecture values and estimated peaks cannot be "
                "read; pull or import it"
            ),
        )
    described = model_description(
        artifact_id=named.artifact,
        size_bytes=named.size_bytes,
        summary=summary,
        table=table,
        evidence=evidence,
        catalog_capabilities=claims,
        allowances=Allowances(),
    )
    return info_view(
        described,
        model=named.model,
        names=named.names,
        table=table,
        architecture_from=source,
        note=note,
    )


READY_S = 180.0  # from the decision to a model server that serves
MEMORY_S = 45.0  # for the machine's report after the probes (agents report every 10 s)
GONE_S = 60.0  # for a deleted qualification workload to be gone
POLL_S = 0.2
API_SUFFIX = "/v1"

Decide = Callable[[WorkloadKind, str, float], "WorkloadObject | Refused | Undecided"]


class QualifyUndecided(NodeauError):
    """The controller did not decide on a qualification workload in time."""


class AmbiguousModel(UnknownModel):
    """The name means different artifacts on different machines of the fleet."""


class FleetModel:
    """What the fleet's reports say of the artifact a typed name means: its id, the name a
    person reads, its summary and size, every name the fleet knows it by, and the first
    machine (by name) whose report holds it verified."""

    def __init__(
        self,
        artifact: str,
        name: str,
        summary: ModelSummary,
        size_bytes: int = 0,
        names: tuple[str, ...] = (),
        machine: str = "",
    ) -> None:
        self.artifact = artifact
        self.name = name
        self.summary = summary
        self.size_bytes = size_bytes
        self.names = names
        self.machine = machine


def fleet_model(text: str, reports: Iterable[MachineReport]) -> FleetModel:
    """The one artifact ``text`` names among the machines' verified models; UnknownModel."""
    held = [(rep.machine, a) for rep in reports for a in rep.artifacts]
    known = [Known(artifact_id=a.id.lower(), names=a.names) for _, a in held]
    match resolve_name(text, known):
        case Resolution() as found:
            holders = [(m, a) for m, a in held if a.id.lower() == found.artifact_id]
            first = holders[0][1]
            machine = min(m for m, _ in holders)
            name = display_name(text, found.names, found.artifact_id)
            return FleetModel(
                found.artifact_id,
                name,
                first.summary,
                first.size_bytes,
                names=found.names,
                machine=machine,
            )
        case Unresolved(miss=Miss.AMBIGUOUS) as missed:
            raise AmbiguousModel(f"{missed.sentence} among the models the fleet holds verified")
        case Unresolved() as missed:
            raise UnknownModel(f"{missed.sentence} among the models the fleet holds verified")
    raise AssertionError("resolve_name answers a Resolution or an Unresolved")


def qualify_on_fleet(
    *,
    objects: WorkloadObjects,
    reports: Callable[[], tuple[MachineReport, ...]],
    records: QualificationRecords,
    pods: ServerPods,
    decide: Decide,
    clock: Callable[[], datetime],
    probe: Probe,
    healthy: Callable[[str], bool],
    runtime: str,
    model: str,
    context_tokens: int | None,
    seed: int,
    wait_s: float = 60.0,
) -> QualificationEvidence | Refused:
    """Qualify ``model`` on the fleet: its evidence (also kept in the cluster), or the
    refusal that stopped it. ``runtime`` names the model server the evidence is of."""
    found = fleet_model(model, reports())
    plan = qualification_plan(found.summary.architecture.name)
    name = "qualify-" + found.artifact[:12]
    rng = random.Random(seed)
    results = list(plan.not_applicable)
    memory: list[MemoryReading] = []
    card, context = "no card", context_tokens or 0
    for task in plan.tasks:
        ask = WorkloadAsk(
            kind=WorkloadKind.SERVICE,
            name=name,
            model=found.artifact,
            task=task,
            context_tokens=context_tokens,
            unproved=True,  # it runs to prove the task: the controller must not refuse it
        )
        if not objects.create(ask):
            raise StateError(
                f"{name} exists: a qualification of {found.name} is already under way "
                f"(nodeau stop {name} --workload ends it)"
            )
        try:
            decision = decide(WorkloadKind.SERVICE, name, wait_s)
            if isinstance(decision, Refused):
                return decision
            if isinstance(decision, Undecided):
                raise QualifyUndecided(
                    f"the controller did not decide on {name} within {wait_s:g} seconds; "
                    "is it running? (kubectl -n nodeau-system get deployments)"
                )
            card = _card_of(decision, reports())
            if decision.record is not None:
                context = context or decision.record.config.context_tokens
            address, why = _serving_address(objects, name, healthy)
            if address is not None:
                key = pods.key(WorkloadKind.SERVICE, name)
                headers = {"Authorization": f"Bearer {key}"} if key else None
                results.extend(probe(address, task, name, rng, headers=headers))
                ended = clock()
                peak = _pod_peak(pods, reports, decision, ended)
                if peak is not None and decision.record is not None:
                    memory.append(
                        MemoryReading(
                            task=task,
                            config_key=decision.record.config.key(),
                            peak_bytes=peak,
                            source=MemorySource.NVML,
                        )
                    )
            else:
                results.extend(not_started(task, why))
        finally:
            objects.delete(WorkloadKind.SERVICE, name)
            _until_gone(objects, name)
    evidence = QualificationEvidence(
        artifact_id=Sha256(hex=found.artifact),
        gpu_model=card,
        runtime=runtime,
        at=clock(),
        context_tokens=context,
        memory=tuple(memory),
        probes=tuple(results),
        seed=seed,
    )
    records.record_evidence(evidence)
    for measured in card_measurements(evidence, note=f"qualification on the fleet, {runtime}"):
        records.record_measurement(measured)
    return evidence


@frozen(kw_only=True)
class PeakAnswer:
    """What a machine's reports say of a Pod's peak: whether they answer yet, and the figure
    (None when they answer that there is none)."""

    answered: bool
    peak_bytes: int | None = None


def pod_peak_in(
    reports: Iterable[MachineReport], machine: str, pod_uid: str, gpu_uuid: str, after: datetime
) -> PeakAnswer:
    """What ``machine``'s report says the Pod took at its peak on card ``gpu_uuid``: its
    bytes, from a report dated after ``after``; no figure when that report lists none (or
    the machine's cards are simulated: they hold nothing of their own); no answer yet while
    no such report is in."""
    rep = next((r for r in reports if r.machine == machine), None)
    if rep is not None and rep.reading.simulated:
        return PeakAnswer(answered=True)
    if rep is None or rep.at <= after:
        return PeakAnswer(answered=False)
    found = [p.peak_bytes for p in rep.pods if (p.pod_uid, p.gpu_uuid) == (pod_uid, gpu_uuid)]
    return PeakAnswer(answered=True, peak_bytes=found[0] if found and found[0] > 0 else None)


def _pod_peak(
    pods: ServerPods,
    reports: Callable[[], tuple[MachineReport, ...]],
    decision: WorkloadObject,
    after: datetime,
) -> int | None:
    """The peak the decision's Pod took on its card, from its machine's first report after
    ``after``; None when none says (waiting up to ``MEMORY_S``)."""
    machine, uuid = decision.machine, decision.gpu_uuid
    pod = pods.read(WorkloadKind.SERVICE, decision.name)
    if pod is None or pod.pod_uid is None or not machine or not uuid:
        return None
    deadline = time.monotonic() + MEMORY_S
    while True:
        found = pod_peak_in(reports(), machine, pod.pod_uid, uuid, after)
        if found.answered:
            return found.peak_bytes
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def _card_of(decision: WorkloadObject, reports: Iterable[MachineReport]) -> str:
    uuid = decision.gpu_uuid
    for rep in reports:
        for g in rep.reading.gpus:
            if g.gpu.uuid == uuid:
                simulated = (
                    " (simulated: the model ran on the CPU)" if rep.reading.simulated else ""
                )
                return g.gpu.model + simulated
    return f"card {uuid}" if uuid else "no card"


def _serving_address(
    objects: WorkloadObjects, name: str, healthy: Callable[[str], bool]
) -> tuple[str | None, str]:
    """The model server's base URL once the GPUService's status states it and the server
    there says it is ready (``/health``; None when it does not come to), and why not. The
    status is read again each time: the address it states is the one that counts."""
    deadline = time.monotonic() + READY_S
    last = "none"
    while time.monotonic() < deadline:
        obj = objects.get(WorkloadKind.SERVICE, name)
        if obj is None:
            return None, f"{name} was deleted before it served"
        base = obj.endpoint.removesuffix(API_SUFFIX)
        if base and healthy(base):
            return base, ""
        state = obj.state
        if state in ("failed", "exited", "stopped"):
            return None, f"its model server {state} before it served"
        last = f"{state or last}{', not answering at ' + base if base else ''}"
        time.sleep(POLL_S)
    return None, f"its model server did not serve within {READY_S:g} s (last: {last})"


def _until_gone(objects: WorkloadObjects, name: str) -> None:
    deadline = time.monotonic() + GONE_S
    while objects.get(WorkloadKind.SERVICE, name) is not None:
        if time.monotonic() >= deadline:
            raise StateError(
                f"{name} was deleted but is still there after {GONE_S:g} s; is the controller "
                "running? (it frees the card before the object goes)"
            )
        time.sleep(POLL_S)
