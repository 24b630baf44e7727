"""An in-memory StateStore, checked by the same contract suite as SQLite's.

One lock around reading, deciding and recording stands for SQLite's write
transaction; the rules on what may be recorded are the domain's (``nodeau.domain.recording``:
(``admitted_ledger``, ``check_update``, ``check_release``), so the two cannot drift.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from returns.result import Failure, Result, Success

from nodeau.domain.recording import (
    Conflict,
    admitted_event,
    admitted_ledger,
    check_release,
    check_update,
    moved_ledger,
    moved_text,
    released_text,
)
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.ports.state import (
    Admission,
    Event,
    Snapshot,
    StateError,
    UnknownWorkload,
    WorkloadRecord,
)


class FakeStateStore:
    """``StateStore`` in memory, safe across threads of one process."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, WorkloadRecord] = {}
        self._reservations: dict[str, tuple[Reservation, ...]] = {}  # every card, in order
        self._admissions: dict[str, Admission] = {}
        self._events: list[Event] = []

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot()

    def admit(
        self, workload: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        with self._lock:
            snapshot = self._snapshot()
            match decide(snapshot):
                case Failure() as refused:
                    return refused
                case Success(Admission() as admission) as outcome:
                    pass
            if admission.record.workload.name != workload:
                raise ValueError(
                    f"admit({workload!r}) decided about {admission.record.workload.name!r}"
                )
            if isinstance(conflict := admitted_ledger(snapshot, admission), Conflict):
                raise StateError(conflict.sentence)
            name = admission.record.workload.name
            self._records[name] = admission.record
            self._reservations[name] = admission.placement.reservations
            self._admissions[name] = admission
            self._events.append(
                Event(at=self._clock(), workload=name, text=admitted_event(admission))
            )
            return outcome

    def move(
        self, name: str, decide: Callable[[Snapshot, WorkloadRecord], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        with self._lock:
            before = self._record(name)
            snapshot = self._snapshot()
            rest = Ledger(
                reservations=tuple(x for x in snapshot.ledger.reservations if x.workload != name)
            )
            match decide(Snapshot(ledger=rest, workloads=()), before):
                case Failure() as refused:
                    return refused
                case Success(Admission() as admission) as outcome:
                    pass
            if isinstance(conflict := moved_ledger(snapshot, before, admission), Conflict):
                raise StateError(conflict.sentence)
            self._records[name] = admission.record
            self._reservations[name] = admission.placement.reservations
            self._admissions[name] = admission
            self._events.append(Event(at=self._clock(), workload=name, text=moved_text(admission)))
            return outcome

    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        with self._lock:
            before = self._record(name)
            after = change(before)
            check_update(before, after)
            self._records[name] = after
            return after

    def release(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        with self._lock:
            before = self._record(name)
            after = change(before)
            check_release(before, after)
            self._records[name] = after
            freed = self._reservations.pop(name, ())
            if freed:
                self._events.append(
                    Event(at=self._clock(), workload=name, text=released_text(after, *freed))
                )
            return after

    def admission(self, name: str) -> Admission:
        with self._lock:
            if name not in self._admissions:
                raise UnknownWorkload(f"no workload called {name} in memory")
            return self._admissions[name]

    def record_event(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def events(self, name: str | None = None) -> tuple[Event, ...]:
        with self._lock:
            return tuple(e for e in self._events if name is None or e.workload == name)

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            ledger=Ledger(
                reservations=tuple(r for held in self._reservations.values() for r in held)
            ),
            workloads=tuple(self._records.values()),
        )

    def _record(self, name: str) -> WorkloadRecord:
        if name not in self._records:
            raise UnknownWorkload(f"no workload called {name} in memory")
        return self._records[name]
