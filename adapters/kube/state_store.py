"""The fleet's state in the cluster: the ledger ConfigMap and the status of each workload object.

``KubeStateStore`` is ``ports.state.StateStore`` on a real API server
(docs/adr/0004-fleet-on-kubernetes.md), checked by the same contract suite as SQLite.

Decisions recorded here:

* An admission reads the ledger and the objects of the one name it is about (never
  every object: ``decide`` sees the ledger and no records), decides, and replaces
  the ledger under the resourceVersion it read; a 409 means another controller decided first,
  so it reads again and decides again (at most ``MAX_TRIES`` times, then StateError).
  Only after the ledger write succeeds is the object created (if a person had not
  already applied it) and its status written, then the "Admitted" Event.
* A reservation is backed when its workload's object records an admission of
  exactly that reservation and a record that still holds its card. Any other is
  a crash's leftover (ledger written, status not): it is dropped in the next
  ledger write for that workload, and the decision for that workload is taken
  without it, so a workload is never kept off a card by its own leftover. Another
  workload's leftover is left alone: it may be an admission still in flight.
* Each reservation written carries a claim (which controller, when). A workload's
  own unbacked reservation claimed by another controller less than
  ``CLAIM_GRACE`` ago is that controller's admission in flight, not a leftover:
  the second controller does not decide again (AdmissionInFlight, retried on its
  next pass), so two controllers admitting the same workload cannot leave the
  ledger and the status naming different cards. Only a controller stalled longer
  than the grace between its two writes could; a status that already records
  another card's admission is never overwritten.
* A release frees the ledger first, then writes the finished state: a crash in
  between leaves a record that a second release finishes, never a card held by
  nobody.
* Workloads come back sorted by name; the rules on what may be recorded are the
  domain's (``nodeau.domain.recording``).
* It is a ``StateStore``: a failure talking to the cluster (``ClusterError``) leaves
  it as ``StateError``, raised from it, with the same line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from returns.result import Failure, Result, Success

from nodeau.adapters.kube import events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict
from nodeau.adapters.kube.guards import (
    AdmissionInFlight,
    check_in_flight,
    check_name_free,
    holds_other_card,
)
from nodeau.adapters.kube.ledger import (
    leftovers,
    read_ledger,
    read_state,
    write_ledger,
)
from nodeau.adapters.kube.objects import (
    MAX_TRIES,
    KubeObject,
    admitted_status,
    create_object,
    find_object,
    get_object,
    record_fields,
    record_of,
    released_status,
    write_status,
)
from nodeau.adapters.record_json import RecordError, unpack
from nodeau.domain.recording import (
    Claim,
    admitted_ledger,
    admitted_text,
    check_release,
    check_update,
    moved_ledger,
    moved_text,
    released_text,
)
from nodeau.domain.recording import (
    Conflict as RecordingConflict,
)
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.cluster import ClusterError
from nodeau.ports.state import (
    Admission,
    Event,
    Snapshot,
    StateError,
    UnknownWorkload,
    WorkloadRecord,
)

P = ParamSpec("P")
T = TypeVar("T")


@contextmanager
def _state_errors() -> Iterator[None]:
    try:
        yield
    except ClusterError as exc:
        raise StateError(exc.one_line()) from exc


def _as_state_errors(method: Callable[P, T]) -> Callable[P, T]:
    """The method's ClusterErrors as the StateStore port's StateError."""

    @functools.wraps(method)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        with _state_errors():
            return method(*args, **kwargs)

    return wrapped


class KubeStateStore:
    """``StateStore`` kept in the cluster, shared by every controller that talks to it."""

    def __init__(
        self, api: Any, *, clock: Callable[[], datetime], identity: str = "nodeau"
    ) -> None:
        self._api = api
        self._clock = clock
        self._identity = identity

    @_as_state_errors
    def snapshot(self) -> Snapshot:
        """The ledger and every recorded workload, as they are now."""
        return read_state(self._api).snapshot()

    @_as_state_errors
    def admit(
        self, workload: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Decide on the ledger as read and record the decision under that ledger's version.

        ``decide`` gets the ledger and no records: an admission reads the objects called
        ``workload``, never every object (a fleet of hundreds would be listed per decision).
        """
        for _ in range(MAX_TRIES):
            ledger = read_ledger(self._api)
            found = {kind: get_object(self._api, kind, workload) for kind in WorkloadKind}
            mine = tuple(x for x in ledger.reservations if x.workload == workload)
            present = tuple(o for o in found.values() if o is not None)
            leftover = bool(mine) and bool(leftovers(mine, present))
            kept = tuple(
                x for x in ledger.reservations if not (leftover and x.workload == workload)
            )
            outcome = decide(Snapshot(ledger=Ledger(reservations=kept), workloads=()))
            match outcome:
                case Failure():
                    return outcome  # a refusal records nothing
                case Success(Admission() as admission):
                    pass
            record = admission.record
            if record.workload.name != workload:
                raise ValueError(
                    f"admit({workload!r}) decided about {record.workload.name!r} instead"
                )
            check_name_free(found, record)
            own = found[record.workload.kind]
            now = self._clock()
            if leftover:
                check_in_flight(ledger, workload, now, self._identity)
            records = (record_of(own),) if own is not None and "record" in own.status else ()
            before = Snapshot(ledger=Ledger(reservations=kept), workloads=records)
            after = admitted_ledger(before, admission)
            if isinstance(after, RecordingConflict):
                raise StateError(after.sentence)
            claims = {**ledger.claims, workload: Claim(by=self._identity, at=now)}
            try:
                write_ledger(self._api, after.reservations, ledger.version, claims)
            except Conflict:
                continue  # someone decided first: decide again on what they recorded
            self._record_admission(admission, own, now)
            return outcome
        raise StateError(
            f"cannot record an admission: the reservation ledger changed under it "
            f"{MAX_TRIES} times in a row"
        )

    @_as_state_errors
    def move(
        self, name: str, decide: Callable[[Snapshot, WorkloadRecord], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Move ``name``'s reservation to the card ``decide`` chooses, under the ledger's
        version, then record the new admission in the object's status."""
        for _ in range(MAX_TRIES):
            ledger = read_ledger(self._api)
            found = self._holder(name)
            before = self._record_in(found)
            rest = Ledger(reservations=tuple(x for x in ledger.reservations if x.workload != name))
            outcome = decide(Snapshot(ledger=rest, workloads=()), before)
            match outcome:
                case Failure():
                    return outcome
                case Success(Admission() as admission):
                    pass
            held = Ledger(reservations=ledger.reservations)
            after = moved_ledger(Snapshot(ledger=held, workloads=()), before, admission)
            if isinstance(after, RecordingConflict):
                raise StateError(after.sentence)
            now = self._clock()
            claims = {**ledger.claims, name: Claim(by=self._identity, at=now)}
            try:
                write_ledger(self._api, after.reservations, ledger.version, claims)
            except Conflict:
                continue
            self._record_move(admission, before, found, now)
            return outcome
        raise StateError(
            f"cannot record the move of {name}: the reservation ledger changed under it "
            f"{MAX_TRIES} times in a row"
        )

    @_as_state_errors
    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Replace the record in the object's status by ``change(record)``."""
        found = self._holder(name)
        now = self._clock()
        changed: list[WorkloadRecord] = []

        def apply(current: KubeObject) -> dict[str, Any]:
            before = self._record_in(current)
            after = change(before)
            check_update(before, after)
            changed[:] = [after]
            return {**current.status, **record_fields(after, now)}

        write_status(self._api, found.kind, name, apply, first=found)
        return changed[0]

    @_as_state_errors
    def release(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Free the workload's reservation, then record ``change(record)`` (a finished state)."""
        found = self._holder(name)
        before = self._record_in(found)
        check_release(before, change(before))  # refused before anything is written
        freed = self._free(name)
        now = self._clock()
        changed: list[WorkloadRecord] = []

        def apply(current: KubeObject) -> dict[str, Any]:
            before = self._record_in(current)
            after = change(before)
            check_release(before, after)
            changed[:] = [after]
            message = released_text(after, freed) if freed else None
            return released_status(current, after, now, message)

        written = write_status(self._api, found.kind, name, apply, first=found)
        if freed is not None:
            self._event(name, written, "Released", released_text(changed[0], freed), now)
        return changed[0]

    @_as_state_errors
    def admission(self, name: str) -> Admission:
        """The admission recorded in the workload's status."""
        found = find_object(self._api, name)
        if found is None or "admission" not in found.status:
            raise UnknownWorkload(f"no workload called {name} in {r.NAMESPACE}")
        try:
            return unpack(found.status["admission"], Admission, f"the admission of {name}")
        except RecordError as exc:
            raise StateError(f"{found.title}: {exc}") from exc

    @_as_state_errors
    def record_event(self, event: Event) -> None:
        """A note about a workload, as an Event on its object (reason "Note")."""
        involved = find_object(self._api, event.workload)
        self._event(event.workload, involved, "Note", event.text, event.at)

    @_as_state_errors
    def events(self, name: str | None = None) -> tuple[Event, ...]:
        """Events about workloads, in the order recorded; of one workload when named."""
        return events.read(self._api, name)

    # -- plumbing

    def _record_admission(
        self, admission: Admission, known: KubeObject | None, now: datetime
    ) -> None:
        record = admission.record
        target = known or create_object(self._api, record)

        def apply(current: KubeObject) -> dict[str, Any]:
            if holds_other_card(current, admission):
                raise AdmissionInFlight(
                    f"{current.title} already records another admission; it is not overwritten"
                )
            text = admitted_text(admission)
            return admitted_status(current, admission, now, self._identity, text)

        written = write_status(
            self._api, record.workload.kind, record.workload.name, apply, first=target
        )
        self._event(record.workload.name, written, "Admitted", admitted_text(admission), now)

    def _record_move(
        self, admission: Admission, before: WorkloadRecord, found: KubeObject, now: datetime
    ) -> None:
        record = admission.record

        def apply(current: KubeObject) -> dict[str, Any]:
            if self._record_in(current).workload != before.workload:
                raise AdmissionInFlight(
                    f"{current.title} changed while it was being moved; it is not overwritten"
                )
            return admitted_status(current, admission, now, self._identity, moved_text(admission))

        written = write_status(self._api, found.kind, record.workload.name, apply, first=found)
        self._event(record.workload.name, written, "Recovered", moved_text(admission), now)

    def _free(self, name: str) -> Reservation | None:
        """Take the workload's reservation out of the ledger; the one it held, if any."""
        for _ in range(MAX_TRIES):
            ledger = read_ledger(self._api)
            held = next((x for x in ledger.reservations if x.workload == name), None)
            if held is None:
                return None
            kept = tuple(x for x in ledger.reservations if x.workload != name)
            try:
                write_ledger(self._api, kept, ledger.version, ledger.claims)
            except Conflict:
                continue
            return held
        raise StateError(
            f"cannot release {name}: the reservation ledger changed under it "
            f"{MAX_TRIES} times in a row"
        )

    def _holder(self, name: str) -> KubeObject:
        found = find_object(self._api, name)
        if found is None or "record" not in found.status:
            raise UnknownWorkload(f"no workload called {name} in {r.NAMESPACE}")
        return found

    def _record_in(self, found: KubeObject) -> WorkloadRecord:
        if "record" not in found.status:
            raise UnknownWorkload(f"no workload called {found.name} in {r.NAMESPACE}")
        return record_of(found)

    def _event(
        self,
        name: str,
        involved: KubeObject | None,
        reason: str,
        message: str,
        at: datetime,
        *,
        warning: bool = False,
    ) -> None:
        events.record(
            self._api,
            workload=name,
            involved=involved,
            reason=reason,
            message=message,
            at=at,
            identity=self._identity,
            warning=warning,
        )
