"""The cluster's ports in memory, checked by the same contract suite as the Kubernetes adapters.

``FakeCluster`` holds one fleet; its ``FakeClusterStore`` also does what ``KubeStateStore`` does
(an admission creates the object, the record is its status). Servers run only when a test says
(``FakeServerPods.run``, ``end``, ``report``, ``write_log``), as KWOK or a kubelet would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import define, evolve, field
from returns.result import Result, Success

from nodeau.adapters.entitlement_document import Ed25519EntitlementVerifier
from nodeau.adapters.organisation_document import parse_organisation
from nodeau.apps.controller.loop import ControllerPorts
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.copies import CopyRequest, find_request, with_ask, without_ask
from nodeau.domain.fleet_reports import MachineArtifact, MachineReport, MarkedFleet
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.health import MachineHealth, Signals
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts
from nodeau.domain.memory import GIB
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.organisation import Organisation
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.plans import PlanName
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, ps_sentence
from nodeau.ports.cluster import ClusterError, ReportSet, ServerPod, UnknownMachine
from nodeau.ports.entitlements import StoredEntitlement
from nodeau.ports.join_tokens import BootstrapToken
from nodeau.ports.state import Admission, Snapshot, UnknownWorkload, WorkloadRecord
from nodeau.ports.workload_objects import Condition, WorkloadObject, check_status_fields
from tests.support.builders.entitlements import document, trusted
from tests.support.fakes.fake_state import FakeStateStore

KIND_NAMES = {WorkloadKind.SERVICE: "GPUService", WorkloadKind.BATCH: "BatchJob"}


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- machines ------------------------------------------------------------------------------------


@define
class _Node:
    drained: bool = False
    drained_at: datetime | None = None
    policy: Policy | None = None
    upgrading: bool = False
    control_plane: bool = False
    heartbeat_at: datetime | None = None


class FakeFleetMarks:
    """``FleetMarks`` over the fake's nodes; running workloads are the ledger's."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self.fleet_policy: Policy | None = None

    def read(self) -> MarkedFleet:
        nodes = self._cluster.nodes
        return MarkedFleet(
            nodes=tuple(sorted(nodes)),
            drained=frozenset(n for n, node in nodes.items() if node.drained),
            upgrading=frozenset(n for n, node in nodes.items() if node.upgrading),
            control_plane=frozenset(n for n, node in nodes.items() if node.control_plane),
            settings=SchedulingSettings(
                fleet_policy=self.fleet_policy or Policy.PACK,
                overrides=tuple(
                    sorted((n, node.policy) for n, node in nodes.items() if node.policy)
                ),
            ),
        )

    def _node(self, machine: str) -> _Node:
        if machine not in self._cluster.nodes:
            raise UnknownMachine.named(machine)
        return self._cluster.nodes[machine]

    def write_drained(self, machine: str, at: datetime | None) -> None:
        node = self._node(machine)
        node.drained, node.drained_at = at is not None, at

    def write_upgrading(self, machine: str, upgrading: bool) -> None:
        self._node(machine).upgrading = upgrading

    def write_policy(self, policy: Policy, machine: str | None = None) -> None:
        if machine is not None:
            self._node(machine).policy = policy
        else:
            self.fleet_policy = policy


class FakeMachineReports:
    """``MachineReports``: the last report each machine published, and the heartbeats."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self.reports: dict[str, MachineReport] = {}
        self.unreadable: dict[str, str] = {}  # machine: the problem with its report

    def publish(self, report: MachineReport) -> None:
        self.unreadable.pop(report.machine, None)
        self.reports[report.machine] = report

    def read(self) -> ReportSet:
        return ReportSet(
            reports=tuple(self.reports[m] for m in sorted(self.reports)),
            problems=tuple(self.unreadable[m] for m in sorted(self.unreadable)),
        )

    def signals(self) -> Mapping[str, Signals]:
        return {
            name: Signals(
                node_heartbeat_at=node.heartbeat_at,
                agent_report_at=self.reports[name].at if name in self.reports else None,
                upgrading=node.upgrading,
            )
            for name, node in sorted(self._cluster.nodes.items())
        }


class FakeHealthRecords:
    """``HealthRecords`` in a dict."""

    def __init__(self) -> None:
        self.held: dict[str, MachineHealth] = {}

    def read(self) -> Mapping[str, MachineHealth]:
        return dict(self.held)

    def write(self, health: Mapping[str, MachineHealth]) -> None:
        self.held = dict(health)


class FakeReservationLedger:
    """``ReservationLedger``: the fake state store's ledger."""

    def __init__(self, store: FakeStateStore) -> None:
        self._store = store

    def read(self) -> Ledger:
        return self._store.snapshot().ledger


# -- workload objects ----------------------------------------------------------------------------


@define
class _Stored:
    ask: WorkloadAsk
    uid: str
    order: int
    version: int = 1
    generation: int = 1
    status: dict[str, Any] = field(factory=dict)
    guarded: bool = False
    deleting: bool = False


def spec_of(ask: WorkloadAsk) -> dict[str, Any]:
    """The spec a person would have applied (the fields ADR 0004 names)."""
    spec: dict[str, Any] = {"model": ask.model, "task": ask.task.value}
    if ask.kind is WorkloadKind.SERVICE:
        spec["recovery"] = ask.recovery.value
        spec["recoveryAfterSeconds"] = int(ask.recovery_after.total_seconds())
        spec["endpoint"] = "stopped" if ask.endpoint_stopped else "serving"
    if ask.requests:
        spec["requests"] = [
            {"custom_id": q.custom_id, "method": "POST", "url": q.url, "body": dict(q.body)}
            for q in ask.requests
        ]
    if ask.context_tokens is not None:
        spec["contextTokens"] = ask.context_tokens
    return spec


def with_conditions(
    status: Mapping[str, Any], conditions: Sequence[Condition], at: datetime
) -> list[dict[str, Any]]:
    merged = [dict(c) for c in status.get("conditions") or ()]
    for condition in conditions:
        wanted = "True" if condition.ok else "False"
        old = next((c for c in merged if c.get("type") == condition.type), None)
        since = old["lastTransitionTime"] if old and old.get("status") == wanted else stamp(at)
        new = {
            "type": condition.type,
            "status": wanted,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": since,
        }
        if old is None:
            merged.append(new)
        else:
            merged[merged.index(old)] = new
    return merged


class FakeWorkloadObjects:
    """``WorkloadObjects`` in memory; the record in each status is the state store's."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self.stored: dict[tuple[WorkloadKind, str], _Stored] = {}
        self.admissions: dict[tuple[WorkloadKind, str], Admission] = {}  # as the store wrote
        self._made = 0

    def list_all(self) -> tuple[WorkloadObject, ...]:
        keys = sorted(
            self.stored,
            key=lambda k: (k[0] is not WorkloadKind.SERVICE, self.stored[k].order, k[1]),
        )
        return tuple(self._view(k) for k in keys)

    def get(self, kind: WorkloadKind, name: str) -> WorkloadObject | None:
        return self._view((kind, name)) if (kind, name) in self.stored else None

    def admission(self, obj: WorkloadObject) -> Admission | None:
        return self.admissions.get((obj.kind, obj.name))

    def find(self, name: str) -> WorkloadObject | None:
        for kind in (WorkloadKind.SERVICE, WorkloadKind.BATCH):
            found = self.get(kind, name)
            if found is not None:
                return found
        return None

    def create(self, ask: WorkloadAsk) -> bool:
        with self._lock:
            if (ask.kind, ask.name) in self.stored:
                return False
            self._made += 1
            self.stored[ask.kind, ask.name] = _Stored(
                ask=ask, uid=f"uid-{self._made}", order=self._made
            )
            return True

    def want_endpoint(self, kind: WorkloadKind, name: str, serving: bool) -> None:
        held = self._held(kind, name)
        held.ask = evolve(held.ask, endpoint_stopped=not serving)
        held.version += 1
        held.generation += 1

    def set_recovery(
        self, kind: WorkloadKind, name: str, mode: RecoveryMode, after: timedelta
    ) -> None:
        if kind is not WorkloadKind.SERVICE:
            raise ValueError(f"recovery applies to served workloads; {name} is a batch job")
        held = self._held(kind, name)
        held.ask = evolve(held.ask, recovery=mode, recovery_after=after)
        held.version += 1
        held.generation += 1

    def delete(self, kind: WorkloadKind, name: str) -> None:
        held = self.stored.get((kind, name))
        if held is None:
            return
        if held.guarded:
            held.deleting = True
            held.version += 1
        else:
            del self.stored[kind, name]
            self.admissions.pop((kind, name), None)

    def guard(self, obj: WorkloadObject) -> bool:
        held = self.stored.get((obj.kind, obj.name))
        if held is None or str(held.version) != obj.version:
            return False
        if not held.guarded:
            held.guarded = True
            held.version += 1
        return True

    def unguard(self, obj: WorkloadObject) -> bool:
        held = self.stored.get((obj.kind, obj.name))
        if held is None or str(held.version) != obj.version:
            return False
        if held.deleting:
            del self.stored[obj.kind, obj.name]
            self.admissions.pop((obj.kind, obj.name), None)
        elif held.guarded:
            held.guarded = False
            held.version += 1
        return True

    def set_status(
        self,
        kind: WorkloadKind,
        name: str,
        fields: Mapping[str, Any],
        conditions: Sequence[Condition],
        at: datetime,
    ) -> None:
        check_status_fields(fields)
        held = self._held(kind, name)
        status = {k: v for k, v in {**held.status, **fields}.items() if v is not None}
        if conditions:
            status["conditions"] = with_conditions(status, conditions, at)
        held.status = status
        held.version += 1

    def record_refusal(self, kind: WorkloadKind, name: str, refusal: Refusal, at: datetime) -> None:
        held = self._held(kind, name)
        said = f"{refusal.code.value}: {refusal.sentence}"
        status = {
            **held.status,
            "state": "refused",
            "sentence": refusal.sentence,
            "refusal": {
                "kind": refusal.kind.value,
                "code": refusal.code.value,
                "message": refusal.sentence,
            },
        }
        refused = Condition(
            type="Admitted", ok=False, reason=refusal.kind.value.capitalize(), message=said
        )
        status["conditions"] = with_conditions(status, [refused], at)
        held.status = status
        held.version += 1
        self._cluster.events.record(self._view((kind, name)), "Refused", said, at, warning=True)

    # -- what KubeStateStore writes beside the ledger

    def show_record(self, record: WorkloadRecord, admission: Admission | None) -> None:
        """What the store's writes put in the status: the record, where, the decision."""
        w = record.workload
        key = (w.kind, w.name)
        if key not in self.stored:
            self.create(
                WorkloadAsk(
                    kind=w.kind,
                    name=w.name,
                    model=w.model,
                    task=record.config.task,
                    context_tokens=record.config.context_tokens,
                    recovery=w.recovery_mode,
                    recovery_after=w.recovery_after,
                )
            )
        held = self.stored[key]
        status = {k: v for k, v in held.status.items() if k != "refusal"}
        now = self._cluster.clock()
        status.update(
            state=w.state.value,
            sentence=ps_sentence(w, now),
            machine=w.machine,
            gpuUUID=w.gpu_uuid,
        )
        if admission is not None:
            self.admissions[key] = admission
            reservation = admission.placement.reservation
            status["reservedBytes"] = reservation.bytes
            decided = [
                Condition(type="Admitted", ok=True, reason="Admitted", message="admitted"),
                Condition(type="Placed", ok=True, reason="Placed", message=admission.placement.why),
            ]
            status["conditions"] = with_conditions(status, decided, now)
        held.status = status
        held.version += 1

    # -- plumbing

    def _held(self, kind: WorkloadKind, name: str) -> _Stored:
        held = self.stored.get((kind, name))
        if held is None:
            raise UnknownWorkload(f"no workload called {name} in the fake cluster")
        return held

    def _view(self, key: tuple[WorkloadKind, str]) -> WorkloadObject:
        kind, name = key
        held = self.stored[key]
        recorded = self._cluster.store.snapshot().named(name)
        record = recorded if recorded is not None and recorded.workload.kind is kind else None
        return WorkloadObject(
            kind=kind,
            name=name,
            title=f"{KIND_NAMES[kind]} {name}",
            uid=held.uid,
            version=str(held.version),
            generation=held.generation,
            ask=held.ask,
            record=record,
            spec=spec_of(held.ask),
            status=dict(held.status),
            guarded=held.guarded,
            deleting=held.deleting,
        )


class FakeClusterStore(FakeStateStore):
    """The in-memory ``StateStore``, showing what it records on the workload's object as
    ``KubeStateStore`` does (and creating the object when no one had); as it does, an
    admission's ``decide`` sees the ledger and no records (it never lists every object)."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(clock=cluster.clock)
        self._cluster = cluster

    def admit(
        self, workload: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        def on_the_ledger(snapshot: Snapshot) -> Result[Admission, Refusal]:
            return decide(Snapshot(ledger=snapshot.ledger, workloads=()))

        outcome = super().admit(workload, on_the_ledger)
        match outcome:
            case Success(Admission() as admission):
                self._cluster.objects.show_record(admission.record, admission)
        return outcome

    def move(
        self, name: str, decide: Callable[[Snapshot, WorkloadRecord], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        outcome = super().move(name, decide)
        match outcome:
            case Success(Admission() as admission):
                self._cluster.objects.show_record(admission.record, admission)
        return outcome

    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        record = super().update(name, change)
        self._cluster.objects.show_record(record, None)
        return record

    def release(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        record = super().release(name, change)
        self._cluster.objects.show_record(record, None)
        return record


# -- servers, events, watches, tokens -------------------------------------------------------------


class FakeServerPods:
    """``ServerPods`` in a dict; ``run``, ``end``, ``report`` and ``write_log`` stand for the
    machine running them (its kubelet)."""

    def __init__(self, *, serves_real_cards: bool = True) -> None:
        self.pods: dict[tuple[WorkloadKind, str], ServerPod] = {}
        self.logs: dict[tuple[WorkloadKind, str], list[str]] = {}
        self.logs_unserved: set[str] = set()  # machines whose kubelet gives no logs
        self.forced = 0  # servers taken out without their machine's word
        self._real_cards = serves_real_cards  # a CUDA server image is configured
        self.on_card: dict[tuple[WorkloadKind, str], bool] = {}  # each Pod: on its card?

    @property
    def serves_real_cards(self) -> bool:
        return self._real_cards

    def key(self, kind: WorkloadKind, workload: str) -> str | None:
        return f"key-of-{kind.value}-{workload}" if (kind, workload) in self.pods else None

    def read(self, kind: WorkloadKind, workload: str) -> ServerPod | None:
        return self.pods.get((kind, workload))

    def read_all(self) -> tuple[ServerPod, ...]:
        return tuple(self.pods[key] for key in sorted(self.pods))

    def create(self, record: WorkloadRecord, owner: WorkloadObject, *, on_card: bool) -> bool:
        w = record.workload
        if (w.kind, w.name) in self.pods:
            return False
        self.on_card[w.kind, w.name] = on_card
        self.pods[w.kind, w.name] = ServerPod(
            workload=w.name,
            kind=w.kind,
            machine=w.machine,
            gpu_uuid=w.gpu_uuid,
            phase=ServerPhase.STARTING,
            endpoint=None,
        )
        return True

    def delete(self, kind: WorkloadKind, workload: str, *, force: bool = False) -> bool:
        self.forced += int(force and (kind, workload) in self.pods)
        self.logs.pop((kind, workload), None)
        return self.pods.pop((kind, workload), None) is not None

    def log_tail(self, kind: WorkloadKind, workload: str, lines: int) -> tuple[str, ...] | None:
        pod = self.pods.get((kind, workload))
        if pod is None:
            return None
        if pod.machine in self.logs_unserved:
            name = f"{kind.value}-{workload}"
            raise ClusterError(
                f"cannot read the log of {workload}'s model server (Pod {name} on "
                f"{pod.machine}): the API server could not get it from {pod.machine}'s "
                "kubelet (no kubelet answers in the fake)"
            )
        return tuple(self.logs.get((kind, workload), [])[-lines:])

    def write_log(self, kind: WorkloadKind, workload: str, *lines: str) -> None:
        """The server writes these lines to its log."""
        self.logs.setdefault((kind, workload), []).extend(lines)

    def report(
        self,
        kind: WorkloadKind,
        workload: str,
        restarts: ServerRestarts,
        *,
        ready: bool = False,
        address: str = "10.0.0.7",
    ) -> None:
        """The machine's kubelet says what became of the server: its ends and restarts, and
        whether it answers (again)."""
        pod = self.pods[kind, workload]
        phase = ServerPhase.READY if ready else ServerPhase.STARTING
        endpoint = pod.endpoint or f"http://{address}:8080/v1"
        self.pods[kind, workload] = evolve(pod, phase=phase, endpoint=endpoint, restarts=restarts)

    def run(self, address: str = "10.0.0.7") -> None:
        """Every starting server answers now, at ``address``."""
        for key, pod in self.pods.items():
            if pod.phase is ServerPhase.STARTING:
                endpoint = f"http://{address}:8080/v1"
                self.pods[key] = evolve(pod, phase=ServerPhase.READY, endpoint=endpoint)

    def end(self, kind: WorkloadKind, workload: str, *, ok: bool) -> None:
        """The server exits, cleanly or not."""
        phase = ServerPhase.EXITED_OK if ok else ServerPhase.EXITED_FAILED
        self.pods[kind, workload] = evolve(self.pods[kind, workload], phase=phase)


@define
class Said:
    workload: str
    reason: str
    message: str
    at: datetime
    warning: bool


class FakeEventLog:
    """``EventLog`` in a list."""

    def __init__(self) -> None:
        self.said: list[Said] = []

    def record(
        self,
        about: WorkloadObject,
        reason: str,
        message: str,
        at: datetime,
        *,
        warning: bool = False,
    ) -> None:
        self.said.append(Said(about.name, reason, message, at, warning))

    def flush(self) -> None:
        return None  # every event is kept as it is recorded

    @contextmanager
    def held(self) -> Iterator[None]:
        yield  # kept as recorded: nothing waits on writing them

    def reasons(self, workload: str) -> list[str]:
        return [s.reason for s in self.said if s.workload == workload]


class FakeWorkloadWatch:
    """``WorkloadWatch``: ``changed`` passes a key on, as a watch event would."""

    def __init__(self) -> None:
        self.notify: Callable[[WorkloadKind, str], None] | None = None

    def start(self, notify: Callable[[WorkloadKind, str], None], stop: threading.Event) -> None:
        self.notify = notify

    def changed(self, kind: WorkloadKind, name: str) -> None:
        if self.notify is not None:
            self.notify(kind, name)


class FakeBootstrapTokens:
    """``BootstrapTokens`` that remembers what it made."""

    def __init__(self, pin: str = "sha256:" + "0" * 64) -> None:
        self.pin = pin
        self.made: list[tuple[BootstrapToken, datetime]] = []

    def create(
        self, *, now: datetime, ttl: timedelta, description: str
    ) -> tuple[BootstrapToken, datetime]:
        n = len(self.made)
        token = BootstrapToken(id=f"tok{n:03d}", secret=f"{n:016d}")
        self.made.append((token, (now + ttl).replace(microsecond=0)))
        return self.made[-1]

    def ca_pin(self) -> str:
        return self.pin


class FakeModelCopies:
    """``ModelCopies`` in a tuple, changed by the same domain functions as the adapter's."""

    def __init__(self) -> None:
        self.held: tuple[CopyRequest, ...] = ()
        self._lock = threading.Lock()

    def requests(self) -> tuple[CopyRequest, ...]:
        return self.held

    def request(
        self, machine: str, artifact: str, name: str, asker: str, at: datetime
    ) -> CopyRequest:
        with self._lock:
            self.held = with_ask(
                self.held, machine=machine, artifact=artifact, name=name, asker=asker, at=at
            )
            made = find_request(self.held, machine, artifact)
        assert made is not None
        return made

    def withdraw(self, machine: str, artifact: str, asker: str) -> CopyRequest | None:
        with self._lock:
            self.held = without_ask(self.held, machine=machine, artifact=artifact, asker=asker)
            return find_request(self.held, machine, artifact)


# -- the cluster ---------------------------------------------------------------------------------


class FakeOrganisationPolicy:
    """``OrganisationPolicy`` in memory: the document as installed, read by the same reader
    as the file and the ConfigMap (tests/contract/test_organisation_policy.py)."""

    where = "memory"

    def __init__(self) -> None:
        self.document: bytes | None = None

    def read(self) -> Organisation:
        if self.document is None:
            return Organisation.none()
        return parse_organisation(self.document, self.where)

    def install(self, document: bytes) -> Organisation:
        found = parse_organisation(document, "the policy given")
        self.document = document
        return found

    def remove(self) -> bool:
        had, self.document = self.document is not None, None
        return had


class KeptDocument:
    """``KeptEntitlement`` over a document held in memory (None: nothing kept)."""

    def __init__(self, installation_id: str, document: bytes | None) -> None:
        self.installation_id = installation_id
        self.document = document

    def kept(self) -> StoredEntitlement | None:
        return StoredEntitlement(
            installation_id=self.installation_id, document=self.document, anchor=None,
            where="memory",
        )  # fmt: skip


INSTALLATION = "fake-fleet"


def unbounded_entitlement(clock: Callable[[], datetime]) -> KeptDocument:
    """An Enterprise entitlement (no bound) for the fake fleet, signed by the test's key and
    valid for years around ``clock()``: the fleets here are larger than the Home plan."""
    now = clock()
    signed = document(
        INSTALLATION,
        plan=PlanName.ENTERPRISE,
        not_before=now - timedelta(days=365),
        not_after=now + timedelta(days=3650),
        issued_at=now - timedelta(days=365),
    )
    return KeptDocument(INSTALLATION, signed)


class FakeCluster:
    """One fleet's cluster in memory, its role ports as attributes."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self.nodes: dict[str, _Node] = {}
        self.events = FakeEventLog()
        self.objects = FakeWorkloadObjects(self)
        self.store = FakeClusterStore(self)
        self.ledger = FakeReservationLedger(self.store)
        self.marks = FakeFleetMarks(self)
        self.reports = FakeMachineReports(self)
        self.health = FakeHealthRecords()
        self.pods = FakeServerPods()
        self.watch = FakeWorkloadWatch()
        self.tokens = FakeBootstrapTokens()
        self.copies = FakeModelCopies()
        self.entitlement = unbounded_entitlement(clock)
        self.verifier = Ed25519EntitlementVerifier(trusted())
        self.organisation = FakeOrganisationPolicy()

    def controller_ports(self) -> ControllerPorts:
        """The controller's ports on this cluster."""
        return ControllerPorts(
            store=self.store,
            objects=self.objects,
            pods=self.pods,
            reports=self.reports,
            marks=self.marks,
            health=self.health,
            events=self.events,
            watch=self.watch,
            copies=self.copies,
            entitlement=self.entitlement,
            verifier=self.verifier,
            organisation=self.organisation,
        )

    def add_node(self, name: str, *, control_plane: bool = False) -> None:
        """A machine joins the cluster (no report yet)."""
        self.nodes[name] = _Node(control_plane=control_plane)


# -- builders: a machine reporting simulated cards and verified models -----------------------


def gpu_uuid(machine: str, i: int) -> str:
    return f"GPU-{machine}-{i:02d}-0000-sim"


def machine_report(
    machine: str,
    cards: int,
    *artifacts: MachineArtifact,
    at: datetime,
    card_bytes: int = 24 * GIB,
) -> MachineReport:
    """A report of ``cards`` simulated cards and these verified artifacts."""
    gpus = tuple(
        GpuReading(
            gpu=Gpu(uuid=gpu_uuid(machine, i), model="NVIDIA L4", total_bytes=card_bytes,
                    simulated=True),
            free_bytes=card_bytes,
            driver_version="550.54",
        )
        for i in range(cards)
    )  # fmt: skip
    reading = MachineReading(machine=machine, gpus=gpus, simulated=True, note="simulated")
    return MachineReport(reading=reading, at=at, artifacts=artifacts)


def verified(
    machine: str, summary: ModelSummary, *, sha: str, name: str, gib: int
) -> MachineArtifact:
    """A verified copy of a model called ``name`` on ``machine``."""
    return MachineArtifact(
        id=sha,
        names=(name,),
        size_bytes=gib * GIB,
        path=f"/var/lib/nodeau/{machine}/models/{name}.gguf",
        summary=summary,
    )
