"""Ports of the fleet's cluster, one per role: reports, marks, health, workloads, events, copies.

Why it is so: docs/adr/decisions/ports.md (cluster.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from attrs import field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.copies import CopyRequest
from nodeau.domain.fleet_reports import MachineReport, MarkedFleet
from nodeau.domain.health import MachineHealth, Signals
from nodeau.domain.leadership import LeaseRecord
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts
from nodeau.domain.memory import MeasuredTable, Measurement
from nodeau.domain.placement import Policy
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from nodeau.ports.errors import NodeauError

# -- failures ------------------------------------------------------------------------------------


class ClusterError(NodeauError):
    """The cluster could not be reached, or would not do what was asked; one line for a person."""


class ClusterUnreachable(ClusterError):
    """No cluster is configured that could be reached (no kubeconfig, no context, no Pod)."""


class NoAnswer(ClusterUnreachable):
    """A request got no answer from the API server (refused connection, timeout, TLS)."""

    def __init__(self, what: str, reason: str, detail: str | None = None) -> None:
        super().__init__(f"cannot {what}: the cluster does not answer ({detail or reason})")
        self.what = what
        self.reason = reason  # the client's whole message, on one line
        self.detail = detail or reason  # its innermost cause, when it names one


class ClusterRefused(ClusterError):
    """The API server answered with an error status."""

    def __init__(self, what: str, status: int, message: str) -> None:
        super().__init__(f"cannot {what}: {status} {message}")
        self.what = what
        self.status = status
        self.message = message  # what the API server said, on one line

    def one_line(self) -> str:
        hint = {
            401: " (the kubeconfig's credentials were not accepted)",
            403: " (the kubeconfig's user may not do this)",
            404: " (are Nodeau's CRDs installed? kubectl apply -f deploy/)",
        }.get(self.status, "")
        return f"the Kubernetes API answered {self.status}: {' '.join(self.message.split())}{hint}"


class Unauthorized(ClusterRefused):
    """401: the credentials were not accepted."""


class Forbidden(ClusterRefused):
    """403: the credentials may not do this."""


class NotFound(ClusterRefused):
    """404 where something had to be there (a resource type not installed, say)."""


class Conflict(ClusterRefused):
    """409: a write lost a race (stale version, or created meanwhile); read again and retry."""


class UnknownMachine(ClusterError):
    """No machine (Node) by that name in the cluster."""

    @classmethod
    def named(cls, machine: str) -> UnknownMachine:
        """The error for ``machine``, saying where the machines are listed."""
        return cls(f"no machine called {machine!r} in the cluster; nodeau fleet list lists them")


class TokenError(ClusterError):
    """The cluster would not take a bootstrap token."""


# -- values --------------------------------------------------------------------------------------


@frozen(kw_only=True)
class ReportSet:
    """Every readable report, and one line for each machine whose report could not be read."""

    reports: tuple[MachineReport, ...]
    problems: tuple[str, ...]


@frozen(kw_only=True)
class Condition:
    """One condition a workload's status states (``Admitted``, ``Placed``, ``Ready``)."""

    type: str
    ok: bool
    reason: str
    message: str


def _text(value: object) -> str | None:
    """A status value that names something, as text (None when absent or empty)."""
    return str(value) if value else None


@frozen(kw_only=True)
class WorkloadObject:
    """A GPUService or BatchJob as read: what was asked, what was recorded, where it stands.

    ``spec`` and ``status`` are the object's JSON as docs/adr/0004 defines it, for
    commands that show it whole; ``ask`` and ``record`` are the same read into values
    (None when absent or unreadable).
    """

    kind: WorkloadKind
    name: str
    title: str  # how a message names it: "GPUService nodeau-system/chat"
    uid: str
    version: str  # the version read; a guarded write names it
    generation: int | None
    ask: WorkloadAsk | None
    record: WorkloadRecord | None
    spec: Mapping[str, Any] = field(factory=dict, eq=False)
    status: Mapping[str, Any] = field(factory=dict, eq=False)
    guarded: bool = False  # its reservation is released before it can go
    deleting: bool = False  # someone deleted it; it goes once unguarded

    @property
    def decided(self) -> bool:
        """Whether admission has decided on it (admitted it, or refused it)."""
        return bool(self.state)

    @property
    def refused(self) -> bool:
        """Whether admission said no to it (recorded by ``record_refusal``)."""
        return self.state == "refused"

    @property
    def endpoint(self) -> str:
        """The endpoint its status shows ("" for none)."""
        return str(self.status.get("endpoint") or "")

    @property
    def state(self) -> str:
        """The state its status shows ("" before admission decided)."""
        return str(self.status.get("state") or "")

    @property
    def machine(self) -> str | None:
        """The machine its status names (None: none yet)."""
        return _text(self.status.get("machine"))

    @property
    def gpu_uuid(self) -> str | None:
        """The card its status names (None: none yet)."""
        return _text(self.status.get("gpuUUID"))

    @property
    def sentence(self) -> str | None:
        """The sentence its status gives a person, if any."""
        return _text(self.status.get("sentence"))

    @property
    def reserved_bytes(self) -> int | None:
        """The bytes its admission reserved on its card, if admitted."""
        found = self.status.get("reservedBytes")
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    @property
    def source(self) -> str:
        """Whether its reservation was estimated or measured ("estimated" unless it says)."""
        return str(self.status.get("source") or "estimated")

    @property
    def packed_admission(self) -> str | None:
        """Its admission as the store packed it (None: none recorded)."""
        return _text(self.status.get("admission"))

    @property
    def refusal(self) -> Refusal | None:
        """The refusal the controller recorded in its status, if any."""
        raw = self.status.get("refusal")
        if not isinstance(raw, Mapping):
            return None
        return Refusal.of(ReasonCode(str(raw.get("code"))), str(raw.get("message")))

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type its status states, if any."""
        for c in self.status.get("conditions") or ():
            if c.get("type") == type_:
                return Condition(
                    type=type_,
                    ok=c.get("status") == "True",
                    reason=str(c.get("reason", "")),
                    message=str(c.get("message", "")),
                )
        return None


@frozen(kw_only=True)
class ServerPod:
    """A workload's model server as the cluster runs it: where, on which card, how it is,
    and what its machine says of its ends and restarts (its kubelet restarts it in place)."""

    workload: str
    kind: WorkloadKind
    machine: str | None
    gpu_uuid: str | None
    phase: ServerPhase
    endpoint: str | None  # its OpenAI-compatible address, once it has one
    restarts: ServerRestarts = field(factory=ServerRestarts)  # default: it never ended
    pod_uid: str | None = None  # the Pod's UID: what its machine's report names it by


@frozen(kw_only=True)
class Route:
    """Where a served workload answers now, as its object says: its model server's address
    while requests may be routed to it, else why not (fenced, held, recovering, starting)."""

    workload: str
    task: Task
    base_url: str | None  # "http://10.0.0.7:8080"; None: route nothing to it now
    state: str  # its state ("serving", "held", ...), "" before any decision
    why: str  # what its Ready condition says ("" when it says nothing)
    since: datetime | None = None
    api_key: str | None = field(default=None, repr=False)  # what its model server asks for
    names: tuple[str, ...] = ()  # its model's names (as asked, as admitted)
    artifact_id: str = ""  # its artifact's SHA-256 once admitted
    endpoint_stopped: bool = False  # nodeau stop NAME: loaded, but not to be routed to


@frozen(kw_only=True)
class BootstrapToken:
    """A bootstrap token: its public id and its secret half (6 and 16 of [a-z0-9])."""

    id: str
    secret: str

    def __attrs_post_init__(self) -> None:
        alphabet = set("abcdefghijklmnopqrstuvwxyz0123456789")
        shaped = len(self.id) == 6 and len(self.secret) == 16
        if not shaped or not set(self.id + self.secret) <= alphabet:
            raise ValueError("a bootstrap token is 6 and 16 characters of [a-z0-9]")

    @property
    def text(self) -> str:
        """The token as kubeadm takes it: ``<id>.<secret>``."""
        return f"{self.id}.{self.secret}"


TOKEN_SHAPE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
HASH_SHAPE = re.compile(r"^sha256:([0-9a-f]{64})$")


def parse_token(text: str) -> Result[BootstrapToken, str]:
    """A token a person typed, or the sentence saying what shape it must have."""
    shape = TOKEN_SHAPE.match(text.strip())
    if shape is None:
        return Failure(
            "--token must look like abcdef.0123456789abcdef "
            "(6 and 16 characters of a-z and 0-9, joined by a dot)"
        )
    return Success(BootstrapToken(id=shape.group(1), secret=shape.group(2)))


def parse_ca_hash(text: str) -> Result[str, str]:
    """A CA pin a person typed (``sha256:<64 hex>``), or the sentence saying its shape."""
    cleaned = text.strip().lower()
    if HASH_SHAPE.match(cleaned) is None:
        return Failure(
            "--ca-cert-hash must be sha256: followed by 64 hex digits "
            "(as nodeau fleet invite prints it)"
        )
    return Success(cleaned)


# -- ports ---------------------------------------------------------------------------------------


class MachineReports(Protocol):
    """Each machine's latest report and the two signals its health is assessed from."""

    def publish(self, report: MachineReport) -> None:
        """Make ``report`` its machine's latest (the last publish wins, whatever its moment)."""
        ...

    def read(self) -> ReportSet:
        """Every readable report, by machine; one line per machine whose report does not read
        (it never stops the others being read)."""
        ...

    def signals(self) -> Mapping[str, Signals]:
        """Per machine in the cluster: when its node heartbeat and its agent report were last
        seen (None: never), and whether it is marked upgrading."""
        ...


class FleetMarks(Protocol):
    """A person's marks: drained and upgrading machines and the scheduling policy, as
    written; what a mark means is the plane's to say (``domain.scheduling``). Writing one
    never touches a running workload. A write to a machine not in the fleet raises
    UnknownMachine."""

    def read(self) -> MarkedFleet:
        """The machines and their marks now (a policy no one set is the domain's default)."""
        ...

    def write_drained(self, machine: str, at: datetime | None) -> None:
        """Mark the machine drained since ``at``; None takes the mark off."""
        ...

    def write_upgrading(self, machine: str, upgrading: bool) -> None:
        """Put the upgrading mark on the machine, or take it off."""
        ...

    def write_policy(self, policy: Policy, machine: str | None = None) -> None:
        """Set the fleet-wide policy, or one machine's override."""
        ...


class ReservationLedger(Protocol):
    """What each card holds, as the plane's authority records it (read-only here)."""

    def read(self) -> Ledger:
        """The reservations now; empty before the first admission."""
        ...


class HealthRecords(Protocol):
    """Each machine's health as the controller last assessed it (so "since" survives)."""

    def read(self) -> Mapping[str, MachineHealth]:
        """The last assessment of each machine; one that does not read is left out."""
        ...

    def write(self, health: Mapping[str, MachineHealth]) -> None:
        """Record the fleet's health: exactly these machines."""
        ...


STORE_OWNED = frozenset({"record", "admission", "reservation"})  # the state store's to write


def check_status_fields(fields: Mapping[str, Any]) -> None:
    """ValueError when ``set_status`` is asked to write a field only the state store writes
    (its admit, update and release keep the ledger and the record in step)."""
    owned = STORE_OWNED & set(fields)
    if owned:
        raise ValueError(f"set_status may not write {', '.join(sorted(owned))}")


class WorkloadObjects(Protocol):
    """GPUServices and BatchJobs: what people ask for, and the status Nodeau shows on them.

    A GPUService and a BatchJob may share a name; methods taking a kind address one.
    The record and admission in a status are the state store's to write.
    """

    def list_all(self) -> tuple[WorkloadObject, ...]:
        """Every GPUService, then every BatchJob, each oldest first (then by name)."""
        ...

    def get(self, kind: WorkloadKind, name: str) -> WorkloadObject | None:
        """The object of that kind and name, or None."""
        ...

    def admission(self, obj: WorkloadObject) -> Admission | None:
        """The admission recorded in ``obj``'s status, read back (None: none recorded); an
        error naming ``obj`` when what is recorded does not read."""
        ...

    def find(self, name: str) -> WorkloadObject | None:
        """The GPUService called ``name``, else the BatchJob, else None."""
        ...

    def create(self, ask: WorkloadAsk) -> bool:
        """Create the object asked for (no status); False when one by that name exists."""
        ...

    def want_endpoint(self, kind: WorkloadKind, name: str, serving: bool) -> None:
        """Ask for a service's endpoint on or off (the model stays loaded either way);
        UnknownWorkload when there is no such object."""
        ...

    def set_recovery(
        self, kind: WorkloadKind, name: str, mode: RecoveryMode, after: timedelta
    ) -> None:
        """Change a service's recovery choice in its spec (``recovery``, and the delay in
        whole seconds); nothing else in it changes, and its status and server are not
        touched (the controller records the choice). UnknownWorkload when there is no such
        object; ValueError for a batch job (recovery applies to served workloads)."""
        ...

    def delete(self, kind: WorkloadKind, name: str) -> None:
        """Ask for the object to go: a guarded one stays, deleting, until unguarded. None
        by that name is fine."""
        ...

    def guard(self, obj: WorkloadObject) -> bool:
        """Make the object wait for its reservation's release before it can go; False when
        it changed or went since ``obj`` was read (read it again)."""
        ...

    def unguard(self, obj: WorkloadObject) -> bool:
        """Let the object go (a deleting one then goes); False when it changed since read."""
        ...

    def set_status(
        self,
        kind: WorkloadKind,
        name: str,
        fields: Mapping[str, Any],
        conditions: Sequence[Condition],
        at: datetime,
    ) -> None:
        """Merge ``fields`` into the status (None removes one) and state ``conditions`` (a
        condition's transition time moves only when it flips). ValueError for the store's
        own fields (record, admission, reservation); UnknownWorkload when no such object."""
        ...

    def record_refusal(self, kind: WorkloadKind, name: str, refusal: Refusal, at: datetime) -> None:
        """Say on the object why admission refused it: status, condition and a warning
        event. UnknownWorkload when there is no such object; nothing is created."""
        ...


class ServerPods(Protocol):
    """The model-server Pod of each admitted workload, pinned to its machine and card."""

    def read(self, kind: WorkloadKind, workload: str) -> ServerPod | None:
        """The workload's server as it is now, or None when there is none."""
        ...

    def read_all(self) -> tuple[ServerPod, ...]:
        """Every workload's server as it is now, by kind then workload. A reader that keeps
        what it read (the controller's) answers ``read`` from this until it learns more."""
        ...

    def create(self, record: WorkloadRecord, owner: WorkloadObject, *, on_card: bool) -> bool:
        """Start the server the record's admitted configuration calls for, on its machine
        and card; False when it exists already. ``on_card``: the card is real and the server
        uses it (the CUDA image, its layers on the card); else it runs on the CPU (a
        simulated card's, the CPU image)."""
        ...

    @property
    def serves_real_cards(self) -> bool:
        """Whether its servers can run on real NVIDIA cards (a CUDA model-server image is
        configured); without, only the workloads of simulated cards are placed."""
        ...

    def key(self, kind: WorkloadKind, workload: str) -> str | None:
        """The key the workload's model server refuses every request without (made with its
        first server); None when it has none."""
        ...

    def delete(self, kind: WorkloadKind, workload: str, *, force: bool = False) -> bool:
        """Ask the server to go; False when there was none. ``force``: take it out of the
        cluster at once, without waiting for its machine to confirm (a machine that stopped
        answering: its own agent ends the server when it is back)."""
        ...

    def log_tail(self, kind: WorkloadKind, workload: str, lines: int) -> tuple[str, ...] | None:
        """The last ``lines`` lines its model server wrote, oldest first: the run that ended,
        while it is down waiting for its restart, else the run going. None when there is no
        server; ClusterError, naming the machine, when its machine does not give the log."""
        ...


class WorkloadRoutes(Protocol):
    """Where each served workload answers now: what a loopback endpoint routes by. Inference
    traffic goes from the endpoint to the model server; the cluster only says where."""

    def follow(
        self, name: str, changed: Callable[[Route | None], None], stop: threading.Event
    ) -> None:
        """Call ``changed`` with the service's route now (None: no such service), then at
        every change, until ``stop`` is set; a failure to reach the cluster keeps the last
        route and tries again."""
        ...

    def follow_all(
        self, changed: Callable[[Mapping[str, Route]], None], stop: threading.Event
    ) -> None:
        """Call ``changed`` with every service's route now, by name, then at every change of
        any, until ``stop`` is set; a failure to reach the cluster keeps the last routes and
        tries again."""
        ...


class QualificationRecords(Protocol):
    """The fleet's qualification evidence, per artifact (never per alias)."""

    def evidence(self) -> EvidenceBook:
        """Every run kept, per artifact, oldest first."""
        ...

    def record_evidence(self, evidence: QualificationEvidence) -> None:
        """Keep one more run under its artifact."""
        ...

    def measurements(self) -> MeasuredTable:
        """Every measured peak the fleet keeps (possibly none)."""
        ...

    def record_measurement(self, measurement: Measurement) -> None:
        """Keep a measured peak; a newer one of the same key replaces the older."""
        ...


class MeasuredPeaks(Protocol):
    """The peaks qualification measured on the fleet's cards (NVML, per Pod), keyed by
    artifact, card model and runtime configuration as one machine keys its own: what the
    controller's admission uses and labels measured."""

    def measurements(self) -> MeasuredTable:
        """Every measured peak the fleet keeps (possibly none)."""
        ...


class KeptEvidence(Protocol):
    """The fleet's qualification evidence, read only: what the controller's admission reads
    to refuse a service for a task its model has not proved."""

    def evidence(self) -> EvidenceBook:
        """Every run kept, per artifact, oldest first."""
        ...


class EventLog(Protocol):
    """What happened to workloads, for people reading the cluster's own event history."""

    def record(
        self,
        about: WorkloadObject,
        reason: str,
        message: str,
        at: datetime,
        *,
        warning: bool = False,
    ) -> None:
        """Record one event about the object (reasons: Placed, Started, Serving...)."""
        ...

    def flush(self) -> None:
        """Every event recorded so far and not held is written: one may be written after
        ``record`` returned, beside the work that recorded it (as Kubernetes' own recorder
        writes)."""
        ...

    def held(self) -> AbstractContextManager[None]:
        """A stretch of work whose events are written once it ends, each workload's in the
        order recorded: the controller holds its decisions' events so that the writes a
        decision waits for (its claim, its status) go first. Nothing is lost: ``flush``
        after it writes every one."""
        ...


class WorkloadWatch(Protocol):
    """Changes to workload objects and their servers, as they happen."""

    def start(self, notify: Callable[[WorkloadKind, str], None], stop: threading.Event) -> None:
        """Call ``notify(kind, name)`` from background threads for every object seen (listed,
        added, changed, deleted, or its server changed) until ``stop`` is set. It survives
        the cluster's failures; a periodic full pass covers what it misses."""
        ...


class ModelCopies(Protocol):
    """Requests that a machine keep a verified copy of an artifact, and who asks.

    Desired state only: each machine's agent reads the requests for itself and reports
    its progress in its own report. Taking an ask back deletes no file."""

    def requests(self) -> tuple[CopyRequest, ...]:
        """Every request, by machine then artifact; empty before the first."""
        ...

    def request(
        self, machine: str, artifact: str, name: str, asker: str, at: datetime
    ) -> CopyRequest:
        """Add ``asker``'s ask (the domain's ``with_ask``): a request is made if there was
        none, with ``name`` and ``at``; asking again changes nothing. The request as it
        stands after. Whether ``machine`` is in the fleet is the caller's to check."""
        ...

    def withdraw(self, machine: str, artifact: str, asker: str) -> CopyRequest | None:
        """Take ``asker``'s ask back (the domain's ``without_ask``); the request as it
        stands after (None: it went with its last asker, or there was none)."""
        ...


class BootstrapTokens(Protocol):
    """Tokens that let a new machine join the cluster."""

    def create(
        self, *, now: datetime, ttl: timedelta, description: str
    ) -> tuple[BootstrapToken, datetime]:
        """A fresh token valid for ``ttl`` from ``now``, and when it expires; TokenError when
        the cluster will not take one."""
        ...

    def ca_pin(self) -> str:
        """The pin (``sha256:HEX``) of the certificate authority this client trusts."""
        ...


# -- leader election (docs/adr/0015-leader-election.md) ------------------------------------------


class NotLeading(ClusterError):
    """A controller that does not lead (any more) was about to write; it writes nothing."""


@frozen(kw_only=True)
class LeaseRead:
    """The leader Lease as read or as written: what it says, and its resourceVersion."""

    record: LeaseRecord
    version: str


class LeaderLease(Protocol):
    """The one Lease the fleet's controllers elect their leader with. Every write is
    conditional: a create fails when the Lease exists, a replace when it changed since
    ``version`` was read (someone else won; read again)."""

    def read(self) -> LeaseRead | None:
        """The Lease now, or None when there is none yet."""
        ...

    def create(self, record: LeaseRecord) -> LeaseRead | None:
        """Create the Lease saying ``record``; None when another created it first."""
        ...

    def replace(self, record: LeaseRecord, version: str) -> LeaseRead | None:
        """Replace the Lease read at ``version`` by ``record``; None when it changed or went
        since (409 or 404: read again)."""
        ...
