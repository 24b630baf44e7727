"""The fleet's state in the cluster: a Reservation per claimed card, the status of each workload.

Why it is so: docs/adr/decisions/adapters-kube.md (state_store.py).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from attrs import frozen
from returns.result import Failure, Result, Success

from nodeau.adapters.kube import events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.claims import CardTaken, Held, assumed_claim, claim, free, read_claim
from nodeau.adapters.kube.guards import (
    AdmissionInFlight,
    check_in_flight,
    check_name_free,
)
from nodeau.adapters.kube.informer_cache import KnownObjects
from nodeau.adapters.kube.ledger import LedgerRead, read_ledger, read_state, unbacked
from nodeau.adapters.kube.objects import (
    MAX_TRIES,
    KubeObject,
    find_object,
    get_object,
    record_fields,
    record_of,
    released_status,
    write_status,
)
from nodeau.adapters.kube.status_records import StatusRecords, record_in
from nodeau.adapters.record_json import RecordError, unpack
from nodeau.domain.recording import (
    CLAIM_GRACE,
    Claim,
    admitted_ledger,
    check_release,
    check_update,
    moved_ledger,
    released_text,
)
from nodeau.domain.recording import (
    Conflict as RecordingConflict,
)
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Reservation
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


@frozen(kw_only=True)
class _Assumed:
    """An admission decided and counted as held, its claim not made yet."""

    admission: Admission
    own: KubeObject | None  # the workload's object, if a person applied it already
    left: tuple[Held, ...]  # its own leftovers, freed before its claims
    claim: Claim
    held: tuple[Held, ...]  # the claims it is about to make: one per card, in slot order


class KubeStateStore:
    """``StateStore`` kept in the cluster, shared by every controller that talks to it."""

    def __init__(
        self,
        api: Any,
        *,
        clock: Callable[[], datetime],
        identity: str = "nodeau",
        known: KnownObjects | None = None,
        refusal_list_age: timedelta = timedelta(0),
        sending: events.Sending | None = None,
    ) -> None:
        self._api = api
        self._clock = clock
        self._identity = identity
        self._objects = known  # the controller's cache of its objects; None: every read asks
        # its record, admission and Events on the workload's object; Events written beside its
        # work (``sending``), or each at once (None)
        self._status = StatusRecords(api, identity=identity, objects=known, sending=sending)
        self._turn = threading.Condition()  # decisions one at a time; claims known
        self._in_flight = 0  # admissions that decided and have not recorded yet
        self._assumed: dict[str, Held] = {}  # their claims not made yet, by Reservation name
        self._refusal_list_age = refusal_list_age.total_seconds()
        self._lists = 0  # lists of the claims made so far
        self._listed_at: float | None = None  # when the claims known were listed (monotonic)
        self._taken = False  # a claim was lost to another decision since that list
        self._known: LedgerRead | None = None  # the claims as last listed, and our own since

    @_as_state_errors
    def snapshot(self) -> Snapshot:
        """The ledger and every recorded workload, as they are now; unbacked claims made
        ``CLAIM_GRACE`` ago or more are freed first."""
        with self._turn:
            self._turn.wait_for(lambda: self._in_flight == 0)
            reading = read_state(self._api, self._objects)
            now = self._clock()
            stale = tuple(h for h in reading.leftovers if now - h.claim.at >= CLAIM_GRACE)
            for held in stale:
                free(self._api, held)
            self._listed(reading.ledger.without(stale))
            return reading.snapshot(dropping=stale)

    @_as_state_errors
    def admit(
        self, workload: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Decide on the claims as known, claim the chosen card, then record the decision.

        ``decide`` gets the ledger and no records: an admission reads the objects called
        ``workload``, never every object (a fleet of hundreds would be listed per decision).
        Admissions of different workloads may run at once (the controller's workers): each
        decides in turn on the claims known, its chosen card counted as held from then on,
        and claims and records it beside the others.
        """
        confirm = False  # a refusal was decided: decide again on claims fit to refuse on
        relist = False  # a claim was lost: decide again on claims listed again
        since = self._lists  # a list made after this is one made during this admission
        for _ in range(MAX_TRIES):
            found = {k: get_object(self._api, k, workload, self._objects) for k in WorkloadKind}
            with self._turn:
                if confirm:
                    self._turn.wait_for(lambda: self._in_flight == 0)
                unfit = confirm and not self._fit_to_refuse(since)
                known = self._claims(fresh=relist or unfit)
                relist = False
                step = self._assume(workload, decide, known, found, since)
            match step:
                case None:
                    confirm = True  # never refuse on claims unfit to refuse on
                    continue
                case Failure():
                    return step  # a refusal records nothing
                case _Assumed() as assumed:
                    pass
            try:
                for gone in assumed.left:
                    free(self._api, gone)
                held = self._claim_every(assumed.admission, assumed.claim)
            except CardTaken:
                self._settle(assumed.held, (), taken=True)
                relist = True  # someone decided first: decide again on a fresh list
                continue
            except BaseException:
                self._settle(assumed.held, ())
                raise
            self._settle(assumed.held, held, done=False)
            record = functools.partial(
                self._status.record_admission, assumed.admission, assumed.own, assumed.claim.at
            )
            try:
                self._recording(held, record)
            finally:
                self._settle((), ())
            return Success(assumed.admission)
        raise StateError(
            f"cannot record an admission of {workload}: the card it chose was claimed by "
            f"another decision {MAX_TRIES} times in a row"
        )

    def _assume(
        self,
        workload: str,
        decide: Callable[[Snapshot], Result[Admission, Refusal]],
        known: LedgerRead,
        found: Mapping[WorkloadKind, KubeObject | None],
        since: int,
    ) -> _Assumed | Failure[Refusal] | None:
        """Decide on ``known`` (under ``_turn``): the refusal, when it may be kept (None
        when it may not yet), or the admission with its card held from now on."""
        present = tuple(o for o in found.values() if o is not None)
        left = unbacked(known.of_workload(workload), present)
        kept = known.without(left)
        ledger = kept.ledger()
        match decide(Snapshot(ledger=ledger, workloads=())):
            case Failure() as refused:
                return refused if self._fit_to_refuse(since) else None
            case Success(Admission() as admission):
                pass
        record = admission.record
        if record.workload.name != workload:
            raise ValueError(f"admit({workload!r}) decided about {record.workload.name!r} instead")
        check_name_free(found, record)
        own = found[record.workload.kind]
        now = self._clock()
        if left:
            check_in_flight(LedgerRead(held=left), workload, now, self._identity)
        records = (record_of(own),) if own is not None and "record" in own.status else ()
        if isinstance(
            after := admitted_ledger(Snapshot(ledger=ledger, workloads=records), admission),
            RecordingConflict,
        ):
            raise StateError(after.sentence)
        by = self._claim(now)
        held = tuple(assumed_claim(x, by) for x in admission.placement.reservations)
        for one in held:  # held for every decision from now on
            self._assumed[one.name] = one
            kept = kept.with_(one)
        self._known = kept
        self._in_flight += 1
        return _Assumed(admission=admission, own=own, left=left, claim=by, held=held)

    @_as_state_errors
    def move(
        self, name: str, decide: Callable[[Snapshot, WorkloadRecord], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        """Move ``name``'s reservation to the card ``decide`` chooses: claim the new card,
        record the new admission in the object's status, then free the old card. Moves are
        decided and carried out one at a time, with no admission in flight."""
        with self._turn:
            self._turn.wait_for(lambda: self._in_flight == 0)
            return self._move(name, decide)

    def _move(
        self, name: str, decide: Callable[[Snapshot, WorkloadRecord], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        fresh = self._known is None
        for _ in range(MAX_TRIES):
            known = self._claims(fresh=fresh)
            found = self._status.holder(name)
            before = record_in(found)
            rest = known.without(known.of_workload(name))
            outcome = decide(Snapshot(ledger=rest.ledger(), workloads=()), before)
            match outcome:
                case Failure() if not fresh:
                    fresh = True
                    continue
                case Failure():
                    return outcome
                case Success(Admission() as admission):
                    pass
            after = moved_ledger(Snapshot(ledger=known.ledger(), workloads=()), before, admission)
            if isinstance(after, RecordingConflict):
                raise StateError(after.sentence)
            now = self._clock()
            try:
                held = self._claim_every(admission, self._claim(now))
            except CardTaken:
                fresh = True
                continue
            for one in held:
                known = known.with_(one)
            self._known = known
            self._recording(
                held, functools.partial(self._status.record_move, admission, before, found, now)
            )
            for card in before.workload.cards:
                self._free_card(card, name)
            return outcome
        raise StateError(
            f"cannot record the move of {name}: the card it chose was claimed by another "
            f"decision {MAX_TRIES} times in a row"
        )

    @_as_state_errors
    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Replace the record in the object's status by ``change(record)``."""
        found = self._status.holder(name)
        now = self._clock()
        changed: list[WorkloadRecord] = []

        def apply(current: KubeObject) -> dict[str, Any]:
            before = record_in(current)
            after = change(before)
            check_update(before, after)
            changed[:] = [after]
            return {**current.status, **record_fields(after, now)}

        write_status(self._api, found.kind, name, apply, first=found, known=self._objects)
        return changed[0]

    @_as_state_errors
    def release(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        """Free the workload's card, then record ``change(record)`` (a finished state)."""
        found = self._status.holder(name)
        before = record_in(found)
        check_release(before, change(before))  # refused before anything is written
        freed = tuple(
            x for x in (self._free_card(c, name) for c in before.workload.cards) if x is not None
        )
        now = self._clock()
        changed: list[WorkloadRecord] = []

        def apply(current: KubeObject) -> dict[str, Any]:
            before = record_in(current)
            after = change(before)
            check_release(before, after)
            changed[:] = [after]
            message = released_text(after, *freed) if freed else None
            return released_status(current, after, now, message)

        written = write_status(self._api, found.kind, name, apply, first=found, known=self._objects)
        if freed:
            self._status.event(name, written, "Released", released_text(changed[0], *freed), now)
        return changed[0]

    @_as_state_errors
    def admission(self, name: str) -> Admission:
        """The admission recorded in the workload's status."""
        found = find_object(self._api, name, self._objects)
        if found is None or "admission" not in found.status:
            raise UnknownWorkload(f"no workload called {name} in {r.NAMESPACE}")
        try:
            return unpack(found.status["admission"], Admission, f"the admission of {name}")
        except RecordError as exc:
            raise StateError(f"{found.title}: {exc}") from exc

    @_as_state_errors
    def record_event(self, event: Event) -> None:
        """A note about a workload, as an Event on its object (reason "Note")."""
        involved = find_object(self._api, event.workload, self._objects)
        self._status.event(event.workload, involved, "Note", event.text, event.at)

    @_as_state_errors
    def events(self, name: str | None = None) -> tuple[Event, ...]:
        """Events about workloads, in the order recorded; of one workload when named."""
        return events.read(self._api, name)

    # -- plumbing

    def _claims(self, *, fresh: bool) -> LedgerRead:
        """The claims as known; listed again when ``fresh`` or never listed (under
        ``_turn``)."""
        if fresh or self._known is None:
            self._listed(read_ledger(self._api))
        assert self._known is not None
        return self._known

    def _listed(self, claims: LedgerRead) -> None:
        """Keep a list of the claims (under ``_turn``), with the claims of the admissions in
        flight: they are held for every decision until they are made or dropped."""
        known = claims.without(self._assumed.values())
        for assumed in self._assumed.values():
            known = known.with_(assumed)
        self._known = known
        self._lists += 1
        self._listed_at = time.monotonic()
        self._taken = False

    def _fit_to_refuse(self, since: int) -> bool:
        """Whether a refusal may be decided on the claims known (under ``_turn``), for an
        admission that began after list ``since``: no admission is in flight (none may still
        give its card back), no claim has been lost to another decision since the list (no
        other controller claims meanwhile), and the list was made during this admission, or
        at most ``refusal_list_age`` ago."""
        listed = self._listed_at
        recent = (
            listed is not None
            and self._refusal_list_age > 0
            and time.monotonic() - listed <= self._refusal_list_age
        )
        return self._in_flight == 0 and not self._taken and (self._lists > since or recent)

    def _settle(
        self,
        assumed: tuple[Held, ...],
        held: tuple[Held, ...],
        *,
        taken: bool = False,
        done: bool = True,
    ) -> None:
        """An admission in flight moves on: its assumed claims replaced by the claims made
        (``held``) or dropped (none made); ``done``: it is no longer in flight; ``taken``: a
        card was claimed by another decision first (the claims known are then unfit to
        refuse on)."""
        with self._turn:
            if assumed and self._known is not None:
                for one in assumed:
                    self._assumed.pop(one.name, None)
                if not held:
                    self._known = self._known.without(assumed)
                for one in held:
                    self._known = self._known.with_(one)  # in place of the assumed claim
            self._taken = self._taken or taken
            if done:
                self._in_flight -= 1
                self._turn.notify_all()

    def _claim(self, now: datetime) -> Claim:
        return Claim(by=self._identity, at=now)

    def _recording(self, held: tuple[Held, ...], record: Callable[[], None]) -> None:
        """``record()`` the decision whose cards ``held`` claims; the claims are given back
        when another decision is recorded there already."""
        try:
            record()
        except AdmissionInFlight:
            self._give_back(held)
            raise

    def _give_back(self, held: tuple[Held, ...]) -> None:
        for one in held:
            free(self._api, one)
        with self._turn:
            if self._known is not None:
                self._known = self._known.without(held)

    def _claim_every(self, admission: Admission, by: Claim) -> tuple[Held, ...]:
        """Claim every card of the admission in slot order; CardTaken, with the cards
        claimed before it given back, when one is claimed already: a split is held whole
        or not at all, and never recorded half held."""
        made: list[Held] = []
        try:
            for reservation in admission.placement.reservations:
                made.append(claim(self._api, reservation, by))
        except CardTaken:
            for one in made:
                free(self._api, one)
            raise
        return tuple(made)

    def _free_card(self, gpu_uuid: str | None, name: str) -> Reservation | None:
        """Free the card's Reservation if ``name`` holds it; the reservation freed, if any."""
        held = None if gpu_uuid is None else read_claim(self._api, gpu_uuid)
        if held is None or held.reservation.workload != name:
            return None
        freed = free(self._api, held)
        with self._turn:
            if self._known is not None:
                self._known = self._known.without((held,))
        return held.reservation if freed else None
