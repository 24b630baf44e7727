"""Port of the one-machine plane's state: workloads, the reservation ledger, decisions, events.

Why it is so: docs/adr/decisions/ports.md (state.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from returns.result import Result

from nodeau.domain.records import Admission, Event, Snapshot, WorkloadRecord
from nodeau.domain.refusals import Refusal
from nodeau.ports.errors import NodeauError

T = TypeVar("T")

__all__ = [
    "Admission",
    "Event",
    "Snapshot",
    "StateError",
    "StateStore",
    "UnknownWorkload",
    "WorkloadRecord",
]


class StateError(NodeauError):
    """The state could not be read or written; one line for a person."""


class UnknownWorkload(StateError):
    """No workload by that name."""


class StateStore(Protocol):
    """The one-machine plane's state (SQLite)."""

    def snapshot(self) -> Snapshot:
        """Workloads and the ledger as they are now."""
        ...

    def admit(
        self, workload: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Run ``decide`` on a snapshot inside one write transaction and, on success,
        record the workload, its reservations (every card of a split) and the decision
        before anyone else can decide. A refusal records nothing. ``decide`` is about
        ``workload`` (the name the admission records); one that admits another is a bug
        (ValueError)."""
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


class MovingStateStore(StateStore, Protocol):
    """A fleet's state: a workload's reservation can move to another machine (recovery).
    The one-machine plane has nowhere to move a workload to, and is a plain ``StateStore``."""

    def move(
        self, name: str, decide: Callable[[Snapshot, WorkloadRecord], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Run ``decide`` on the ledger without ``name``'s own reservation and its record as
        read, and on success reserve the new card (``recording.moved_ledger``) before the record
        names it, the old card freed after: never one card held twice, never none held.
        A refusal records nothing. StateError when the record changed under the decision
        (another controller moved it first)."""
        ...
