"""Port of the one-machine plane's state: workloads, the reservation ledger, decisions, events.

Every decision that creates a workload is taken inside one write transaction
over a consistent snapshot, so processes racing to admit never over-commit a
card: the second one decides on a ledger that already holds the first one's
reservation.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TypeVar

from attrs import frozen
from returns.result import Result

from nodeau.domain.admission import Admitted
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.placement import Placement
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import Workload
from nodeau.ports.runtime import RunningServer

T = TypeVar("T")


class StateError(Exception):
    """The state could not be read or written; one line for a person."""


class UnknownWorkload(StateError):
    """No workload by that name."""


@frozen(kw_only=True)
class WorkloadRecord:
    """A workload as the plane keeps it: the domain value plus how it is served."""

    workload: Workload
    config: RuntimeConfig
    model_path: str
    endpoint_port: int | None = None  # fixed once chosen: the address survives restarts
    server: RunningServer | None = None


@frozen(kw_only=True)
class Admission:
    """What one admission decided and recorded: the arithmetic and the placement."""

    record: WorkloadRecord
    admitted: Admitted
    placement: Placement
    decided_at: datetime


@frozen(kw_only=True)
class Snapshot:
    """The plane's state at one moment, as a decision reads it."""

    ledger: Ledger
    workloads: tuple[WorkloadRecord, ...]

    def named(self, name: str) -> WorkloadRecord | None:
        return next((w for w in self.workloads if w.workload.name == name), None)


@frozen(kw_only=True)
class Event:
    """Something that happened to a workload, for ``nodeau ps`` history and audits."""

    at: datetime
    workload: str
    text: str


class StateStore(Protocol):
    """The one-machine plane's state (SQLite)."""

    def snapshot(self) -> Snapshot:
        """Workloads and the ledger as they are now."""
        ...

    def admit(
        self, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Run ``decide`` on a snapshot inside one write transaction and, on success,
        record the workload, its reservation and the decision before anyone else
        can decide. A refusal records nothing."""
        ...

    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Replace a record by ``change(record)``, atomically; UnknownWorkload if none."""
        ...

    def release(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Apply ``change`` (a finished state) and free the workload's reservation, atomically."""
        ...

    def admission(self, name: str) -> Admission:
        """The recorded admission of a workload (for ``service explain``, ``placement explain``)."""
        ...

    def record_event(self, event: Event) -> None: ...

    def events(self, name: str | None = None) -> tuple[Event, ...]:
        """Events, oldest first; of one workload when ``name`` is given."""
        ...
