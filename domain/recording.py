"""What a plane may record: the ledger-write rules every ``StateStore`` keeps.

Why it is so: docs/adr/decisions/domain.md (recording.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from attrs import frozen
from returns.result import Failure, Success

from nodeau.domain.admission import gib
from nodeau.domain.hardware import Gpu
from nodeau.domain.records import Admission, Snapshot, WorkloadRecord
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger, Reservation, reserve_cards
from nodeau.domain.workloads import holds_gpu

CLAIM_GRACE = timedelta(minutes=2)  # an admission in flight longer than this is a leftover


@frozen(kw_only=True)
class Conflict:
    """Recording this would break the state: another decision was recorded first."""

    sentence: str


def admitted_ledger(snapshot: Snapshot, admission: Admission) -> Ledger | Conflict:
    """The ledger once this admission is recorded (every card of a split, or none), or why
    it must not be recorded."""
    workload = admission.record.workload
    reservations = admission.placement.reservations
    name = workload.name
    names = {
        admission.admitted.request.workload,
        admission.placement.workload,
        *(r.workload for r in reservations),
    }
    if names != {name}:
        raise ValueError(f"an admission names more than one workload: {sorted(names | {name})}")
    if workload.cards != tuple(r.gpu_uuid for r in reservations) or any(
        r.machine != workload.machine for r in reservations
    ):
        raise ValueError(
            f"workload {name} is on {', '.join(workload.cards)} ({workload.machine}) but its "
            + ("reservation is for " if len(reservations) == 1 else "reservations are for ")
            + ", ".join(f"{r.gpu_uuid} ({r.machine})" for r in reservations)
        )
    if not holds_gpu(workload.state):
        raise ValueError(f"an admitted workload holds its card; {name} is {workload.state.value}")
    assessed = {c.gpu_uuid: c for c in admission.admitted.cards}
    gpus = []
    for reservation in reservations:
        card = assessed.get(reservation.gpu_uuid)
        if card is None or card.machine != reservation.machine:
            raise ValueError(
                f"{name} reserves {reservation.gpu_uuid}, a card its admission never assessed"
            )
        gpus.append(Gpu(uuid=card.gpu_uuid, model=card.gpu_model, total_bytes=card.total_bytes))
    existing = snapshot.named(name)
    if existing is not None and holds_gpu(existing.workload.state):
        return Conflict(sentence=f"a workload called {name} already exists")
    if snapshot.ledger.of_workload(name) is not None:
        return Conflict(sentence=f"{name} already holds a reservation; nothing was recorded")
    match reserve_cards(snapshot.ledger, reservations, gpus):
        case Success(Ledger() as after):
            return after
        case Failure(Refusal() as refusal):
            cards = ", ".join(r.gpu_uuid for r in reservations)
            return Conflict(
                sentence=f"admitting {name} would over-commit {cards}; "
                f"nothing was recorded ({refusal.sentence})"
            )
    raise AssertionError("reserve_cards returns a Result")  # pragma: no cover


def moved_ledger(
    snapshot: Snapshot, before: WorkloadRecord, admission: Admission
) -> Ledger | Conflict:
    """The ledger once a recovery's admission is recorded: the workload's reservation
    moved from its old card to the new one, in one write. ``snapshot`` holds the ledger
    as read, the old reservation still in it."""
    b, a = before.workload, admission.record.workload
    if (a.name, a.kind) != (b.name, b.kind) or a.machine == b.machine:
        raise ValueError(f"a move keeps {b.name} and puts it on another machine than {b.machine}")
    if a.recoveries != b.recoveries + 1 or a.last_recovery is None:
        raise ValueError(f"a move of {b.name} records one more recovery")
    old = snapshot.ledger.of_workload(b.name)
    if old is not None and (old.machine, old.gpu_uuid) != (b.machine, b.gpu_uuid):
        return Conflict(
            sentence=f"{b.name} holds {old.gpu_uuid} on {old.machine} in the ledger, not the "
            f"card its record names; nothing was recorded"
        )
    rest = Ledger(
        reservations=tuple(x for x in snapshot.ledger.reservations if x.workload != b.name)
    )
    return admitted_ledger(Snapshot(ledger=rest, workloads=()), admission)


def check_update(before: WorkloadRecord, after: WorkloadRecord) -> None:
    """An update keeps the workload's name and card, and whether it holds the card."""
    _check_same_workload(before, after)
    if holds_gpu(before.workload.state) != holds_gpu(after.workload.state):
        raise ValueError(
            f"{before.workload.name} cannot go from {before.workload.state.value} to "
            f"{after.workload.state.value} by an update: release frees a card, admission takes one"
        )


def check_release(before: WorkloadRecord, after: WorkloadRecord) -> None:
    """A release keeps the workload's name and card and leaves it in a finished state."""
    _check_same_workload(before, after)
    if holds_gpu(after.workload.state):
        raise ValueError(
            f"releasing {before.workload.name} needs a finished state, "
            f"not {after.workload.state.value}"
        )


def _check_same_workload(before: WorkloadRecord, after: WorkloadRecord) -> None:
    b, a = before.workload, after.workload
    if (a.name, a.machine, a.cards) != (b.name, b.machine, b.cards):
        raise ValueError(
            f"a change to {b.name} on {', '.join(b.cards)} ({b.machine}) may not make it "
            f"{a.name} on {', '.join(a.cards)} ({a.machine})"
        )


def admitted_text(admission: Admission) -> str:
    """Where an admission reserved, and how much (its Admitted condition; its Event says more)."""
    r, more = admission.placement.reservation, admission.placement.more
    if not more:
        return f"admitted onto {r.gpu_uuid} on {r.machine}, reserving {gib(r.bytes)}"
    every = (r, *more)
    return f"admitted across {len(every)} cards on {r.machine}, reserving " + ", ".join(
        f"{gib(x.bytes)} of {x.gpu_uuid}" for x in every
    )


def admitted_event(admission: Admission) -> str:
    """The Event an admission writes: where it reserved, then why placement chose that card
    (one Event for the decision, as the status has its Admitted and Placed conditions)."""
    return f"{admitted_text(admission)}; placed by {admission.placement.why}"


def moved_text(admission: Admission) -> str:
    """The event a recovery's move writes."""
    w, r = admission.record.workload, admission.placement.reservation
    assert w.last_recovery is not None  # moved_ledger checked it
    every = admission.placement.reservations
    cards = ", ".join(x.gpu_uuid for x in every)
    reserved = sum(x.bytes for x in every)
    return (
        f"recovered from {w.last_recovery.from_machine} onto {cards} on {r.machine}, "
        f"reserving {gib(reserved)}; {w.last_recovery.from_machine}'s card is freed"
    )


def released_text(record: WorkloadRecord, *reservations: Reservation) -> str:
    """The event a release writes (every card of a split, in one sentence)."""
    if len(reservations) == 1:
        (r,) = reservations
        return (
            f"{record.workload.state.value}; {r.gpu_uuid} on {r.machine} "
            f"is free again ({gib(r.bytes)} released)"
        )
    cards = ", ".join(r.gpu_uuid for r in reservations)
    freed = sum(r.bytes for r in reservations)
    return (
        f"{record.workload.state.value}; {cards} on {reservations[0].machine} are free again "
        f"({gib(freed)} released)"
    )


@frozen(kw_only=True)
class Claim:
    """Who wrote a workload's reservation, and when."""

    by: str
    at: datetime


@frozen(kw_only=True)
class Backing:
    """What a workload's own record says it holds: its admitted reservation, if it still
    holds a card (None when nothing is recorded, or the workload has finished), and the
    further cards' of a split."""

    workload: str
    holds: Reservation | None
    more: tuple[Reservation, ...] = ()

    @property
    def every(self) -> tuple[Reservation, ...]:
        """Every reservation it backs (none when it holds no card)."""
        return () if self.holds is None else (self.holds, *self.more)


def leftovers(reservations: Iterable[Reservation], backings: Iterable[Backing]) -> frozenset[str]:
    """The workloads whose reservation no record backs."""
    held = {(b.workload, r) for b in backings for r in b.every}
    return frozenset(x.workload for x in reservations if (x.workload, x) not in held)


def in_flight(claim: Claim | None, identity: str, now: datetime) -> bool:
    """Whether an unbacked reservation is another writer's fresh claim (its admission in
    flight, whose decision stands) rather than a leftover."""
    return claim is not None and claim.by != identity and now - claim.at < CLAIM_GRACE


def holds_other_card(recorded: Backing, admission: Admission) -> bool:
    """Whether the record holds a live admission of different reservations."""
    return recorded.holds is not None and recorded.every != admission.placement.reservations
