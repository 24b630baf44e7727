"""Ports of the fleet's cluster, one per role: reports, marks, health, workloads, events, copies.

Why it is so: docs/adr/decisions/ports.md (cluster.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from attrs import field, frozen

from nodeau.domain.copies import CopyRequest
from nodeau.domain.fleet_reports import MachineReport, MarkedFleet
from nodeau.domain.health import MachineHealth, Signals
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts
from nodeau.domain.memory import MeasuredTable, Measurement
from nodeau.domain.placement import Policy
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.reservations import Ledger
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.errors import NodeauError
from nodeau.ports.workload_objects import WorkloadObject

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


# -- values --------------------------------------------------------------------------------------


@frozen(kw_only=True)
class ReportSet:
    """Every readable report, and one line for each machine whose report could not be read."""

    reports: tuple[MachineReport, ...]
    problems: tuple[str, ...]


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
