"""The fleet's state in the cluster: the ledger ConfigMap and the status of each workload object.

``KubeStateStore`` is ``ports.state.StateStore`` on a real API server
(docs/adr/0004-fleet-on-kubernetes.md), checked by the same contract suite as SQLite.

Decisions recorded here:

* An admission reads the ledger and the one object it is about (never every object:
  ``decide`` sees the ledger and no records), decides, and replaces the ledger
  under the resourceVersion it read; a 409 means another controller decided first,
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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from returns.pipeline import is_successful
from returns.result import Result

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
    Claim,
    LedgerRead,
    leftovers,
    read_ledger,
    read_state,
    write_ledger,
)
from nodeau.adapters.kube.objects import (
    MAX_TRIES,
    Condition,
    WorkloadObject,
    admitted_status,
    create_object,
    find_object,
    get_object,
    record_fields,
    record_of,
    refused_status,
    released_status,
    with_conditions,
    write_status,
)
from nodeau.adapters.record_json import RecordError, unpack
from nodeau.domain.recording import (
    Conflict as RecordingConflict,
)
from nodeau.domain.recording import (
    admitted_ledger,
    admitted_text,
    check_release,
    check_update,
    released_text,
)
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import (
    Admission,
    Event,
    Snapshot,
    StateError,
    UnknownWorkload,
    WorkloadRecord,
)

STORE_OWNED = frozenset(
    {"record", "admission", "reservation"}
)  # written by admit, update and release only


class KubeStateStore:
    """``StateStore`` kept in the cluster, shared by every controller that talks to it."""

    def __init__(
        self, api: Any, *, clock: Callable[[], datetime], identity: str = "nodeau"
    ) -> None:
        self._api = api
        self._clock = clock
        self._identity = identity

    def snapshot(self) -> Snapshot:
        """The ledger and every recorded workload, as they are now."""
        return read_state(self._api).snapshot()

    def admit(
        self, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Decide on the ledger as read and record the decision under that ledger's version.

        ``decide`` gets the ledger and no records: an admission reads the one object it
        is about, never every object (a fleet of hundreds would be listed per decision).
        """
        for _ in range(MAX_TRIES):
            ledger = read_ledger(self._api)
            outcome, own, leftover = self._decide(decide, ledger)
            if not is_successful(outcome):
                return outcome  # a refusal records nothing
            admission = outcome.unwrap()
            name = admission.record.workload.name
            now = self._clock()
            if leftover:
                check_in_flight(ledger, name, now, self._identity)
            kept = tuple(x for x in ledger.reservations if not (leftover and x.workload == name))
            records = (record_of(own),) if own is not None and "record" in own.status else ()
            before = Snapshot(ledger=Ledger(reservations=kept), workloads=records)
            after = admitted_ledger(before, admission)
            if isinstance(after, RecordingConflict):
                raise StateError(after.sentence)
            claims = {**ledger.claims, name: Claim(by=self._identity, at=now)}
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

    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Replace the record in the object's status by ``change(record)``."""
        found = self._holder(name)
        now = self._clock()
        changed: list[WorkloadRecord] = []

        def apply(current: WorkloadObject) -> dict[str, Any]:
            before = self._record_in(current)
            after = change(before)
            check_update(before, after)
            changed[:] = [after]
            return {**current.status, **record_fields(after, now)}

        write_status(self._api, found.kind, name, apply, first=found)
        return changed[0]

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

        def apply(current: WorkloadObject) -> dict[str, Any]:
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

    def admission(self, name: str) -> Admission:
        """The admission recorded in the workload's status."""
        found = find_object(self._api, name)
        if found is None or "admission" not in found.status:
            raise UnknownWorkload(f"no workload called {name} in {r.NAMESPACE}")
        try:
            return unpack(found.status["admission"], Admission, f"the admission of {name}")
        except RecordError as exc:
            raise StateError(f"{found.title}: {exc}") from exc

    def record_event(self, event: Event) -> None:
        """A note about a workload, as an Event on its object (reason "Note")."""
        involved = find_object(self._api, event.workload)
        self._event(event.workload, involved, "Note", event.text, event.at)

    def events(self, name: str | None = None) -> tuple[Event, ...]:
        """Events about workloads, in the order recorded; of one workload when named."""
        return events.read(self._api, name)

    def record_refusal(self, kind: WorkloadKind, name: str, refusal: Refusal, at: datetime) -> None:
        """Say on the object why it was not admitted: status, condition, Warning Event.

        UnknownWorkload if there is no such object; nothing is created.
        """
        written = write_status(
            self._api, kind, name, lambda current: refused_status(current, refusal, at)
        )
        message = f"{refusal.code.value}: {refusal.sentence}"
        self._event(name, written, "Refused", message, at, warning=True)

    def set_status(
        self,
        kind: WorkloadKind,
        name: str,
        fields: Mapping[str, Any],
        conditions: Sequence[Condition] = (),
    ) -> None:
        """Merge ``fields`` into the object's status (None removes one) and set ``conditions``
        (type, status, reason, message). ``record`` and ``admission`` are the store's own:
        use admit, update and release for those."""
        owned = STORE_OWNED & set(fields)
        if owned:
            raise ValueError(f"set_status may not write {', '.join(sorted(owned))}")
        now = self._clock()

        def apply(current: WorkloadObject) -> dict[str, Any]:
            status = {**current.status, **fields}
            status = {k: v for k, v in status.items() if v is not None}
            if conditions:
                status["conditions"] = with_conditions(status, conditions, now, current.generation)
            return status

        write_status(self._api, kind, name, apply)

    # -- plumbing

    def _decide(
        self, decide: Callable[[Snapshot], Result[Admission, Refusal]], ledger: LedgerRead
    ) -> tuple[Result[Admission, Refusal], WorkloadObject | None, bool]:
        """The decision on the ledger the admitted workload should see, its object, and
        whether its own reservation in the ledger was a leftover (and so left out).

        Only the decision names the workload: it is asked once on the ledger as read,
        and, when that is a refusal, once on an empty ledger to learn which workload it
        is about (its own leftover may be what keeps it off a card)."""
        outcome = decide(Snapshot(ledger=Ledger(reservations=ledger.reservations), workloads=()))
        probe = outcome
        if not is_successful(outcome):
            probe = decide(Snapshot(ledger=Ledger(), workloads=()))
            if not is_successful(probe):
                return outcome, None, False  # it fails with no reservation at all
        record = probe.unwrap().record
        check_name_free(self._api, record)
        own = get_object(self._api, record.workload.kind, record.workload.name)
        held = tuple(x for x in ledger.reservations if x.workload == record.workload.name)
        if not held or not leftovers(held, (own,) if own is not None else ()):
            return outcome, own, False
        without = tuple(x for x in ledger.reservations if x.workload != record.workload.name)
        return decide(Snapshot(ledger=Ledger(reservations=without), workloads=())), own, True

    def _record_admission(
        self, admission: Admission, known: WorkloadObject | None, now: datetime
    ) -> None:
        record = admission.record
        target = known or create_object(self._api, record)

        def apply(current: WorkloadObject) -> dict[str, Any]:
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

    def _holder(self, name: str) -> WorkloadObject:
        found = find_object(self._api, name)
        if found is None or "record" not in found.status:
            raise UnknownWorkload(f"no workload called {name} in {r.NAMESPACE}")
        return found

    def _record_in(self, found: WorkloadObject) -> WorkloadRecord:
        if "record" not in found.status:
            raise UnknownWorkload(f"no workload called {found.name} in {r.NAMESPACE}")
        return record_of(found)

    def _event(
        self,
        name: str,
        involved: WorkloadObject | None,
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
