"""Reservations: the ledger of who holds which card, and how much of it.

Why it is so: docs/adr/decisions/domain.md (reservations.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from attrs import field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.checks import positive
from nodeau.domain.hardware import Fleet, Gpu
from nodeau.domain.memory import GIB
from nodeau.domain.refusals import ReasonCode, Refusal


@frozen(kw_only=True)
class Reservation:
    """This workload holds this many bytes of this card on this machine."""

    workload: str
    machine: str
    gpu_uuid: str
    bytes: int = field(validator=positive)


@frozen(kw_only=True)
class Ledger:
    """Every reservation in force."""

    reservations: tuple[Reservation, ...] = ()
    # the lookups below, made in one pass at the first of them (a decision makes several
    # per card; a ledger never changes, so neither do they)
    _index: _LedgerIndex | None = field(default=None, init=False, repr=False, eq=False, hash=False)
    # the ledger this one was made from by ``added``, while it is alive: a reader that keeps
    # its own state of that ledger (placement's free cards) follows by the one difference
    _parent: weakref.ref[Ledger] | None = field(
        default=None, init=False, repr=False, eq=False, hash=False
    )

    def added(self, reservation: Reservation) -> Ledger:
        """This ledger with ``reservation`` recorded last, unchecked (``reserve`` checks):
        its lookups are this one's with one more, not worked out again."""
        made = Ledger(reservations=(*self.reservations, reservation))
        object.__setattr__(made, "_index", self._indexed().with_(reservation))
        object.__setattr__(made, "_parent", weakref.ref(self))
        return made

    def added_to(self, earlier: Ledger) -> Reservation | None:
        """The one reservation this ledger was made from ``earlier`` with (``added``), or
        None when it was not (or that is no longer known)."""
        parent = None if self._parent is None else self._parent()
        return self.reservations[-1] if parent is earlier else None

    def holder(self, gpu_uuid: str) -> Reservation | None:
        """The reservation holding this card, if any (the first, were a card held twice)."""
        found: Reservation | None = self._indexed().find("holder", gpu_uuid)
        return found

    def of_workload(self, workload: str) -> Reservation | None:
        found: Reservation | None = self._indexed().find("of_workload", workload)
        return found

    def reserved_bytes(self, gpu_uuid: str) -> int:
        found: int | None = self._indexed().find("reserved", gpu_uuid)
        return 0 if found is None else found

    def on_machine(self, machine: str) -> tuple[Reservation, ...]:
        found: tuple[Reservation, ...] | None = self._indexed().find("on_machine", machine)
        return found or ()

    def _indexed(self) -> _LedgerIndex:
        index = self._index
        if index is None:
            index = _LedgerIndex(self.reservations)
            object.__setattr__(self, "_index", index)
        return index


FLATTEN_AT = 8  # lookups stacked on a ledger's before they are made one again


class _LedgerIndex:
    """A ledger's reservations by card, by workload and by machine, in the ledger's order.

    A ledger made by ``Ledger.added`` keeps the lookups of the one it was made from and
    puts its own one reservation's on top (``base``); every ``FLATTEN_AT`` levels they are
    made one again. So recording a reservation in a ledger of thousands costs a few entries,
    not a copy of every one, and a lookup reads at most ``FLATTEN_AT`` small levels."""

    __slots__ = ("base", "depth", "holder", "of_workload", "on_machine", "reserved")

    def __init__(
        self, reservations: tuple[Reservation, ...] = (), base: _LedgerIndex | None = None
    ) -> None:
        self.base = base
        self.depth: int = 0 if base is None else base.depth + 1
        self.holder: dict[str, Reservation] = {}
        self.of_workload: dict[str, Reservation] = {}
        self.reserved: dict[str, int] = {}
        self.on_machine: dict[str, tuple[Reservation, ...]] = {}
        for r in reservations:
            self._add(r)

    def find(self, lookup: str, key: str) -> Any:
        """The entry of ``key`` in one of the four lookups, topmost level first."""
        level: _LedgerIndex | None = self
        while level is not None:
            found = getattr(level, lookup).get(key)
            if found is not None:
                return found
            level = level.base
        return None

    def _add(self, r: Reservation) -> None:
        if self.find("holder", r.gpu_uuid) is None:  # the first holder stays the holder
            self.holder[r.gpu_uuid] = r
        if self.find("of_workload", r.workload) is None:
            self.of_workload[r.workload] = r
        self.reserved[r.gpu_uuid] = (self.find("reserved", r.gpu_uuid) or 0) + r.bytes
        self.on_machine[r.machine] = (*(self.find("on_machine", r.machine) or ()), r)

    def with_(self, r: Reservation) -> _LedgerIndex:
        """This index with one more reservation, last (stacked on this one, not copied)."""
        base = self.flattened() if self.depth >= FLATTEN_AT else self
        index = _LedgerIndex(base=base)
        index._add(r)
        return index

    def flattened(self) -> _LedgerIndex:
        """The same lookups in one level."""
        levels: list[_LedgerIndex] = []
        level: _LedgerIndex | None = self
        while level is not None:
            levels.append(level)
            level = level.base
        flat = _LedgerIndex()
        for lower in reversed(levels):  # the bottom first: the levels above shadow it
            flat.holder.update(lower.holder)
            flat.of_workload.update(lower.of_workload)
            flat.reserved.update(lower.reserved)
            flat.on_machine.update(lower.on_machine)
        return flat


def free_bytes(ledger: Ledger, gpu: Gpu) -> int:
    """A card's free memory according to the ledger: nothing if a workload holds it."""
    return 0 if ledger.holder(gpu.uuid) is not None else gpu.total_bytes


def reserve(ledger: Ledger, reservation: Reservation, gpu: Gpu) -> Result[Ledger, Refusal]:
    """Record a reservation, or refuse it if the card is held or too small (``reserve_cards``
    of one card). Reserving again exactly what a workload already holds changes nothing."""
    return reserve_cards(ledger, (reservation,), (gpu,))


def reserve_cards(
    ledger: Ledger, reservations: Sequence[Reservation], gpus: Sequence[Gpu]
) -> Result[Ledger, Refusal]:
    """Record a reservation on each card of one workload split across cards of one machine,
    all or none: a refusal (the first card held or too small) leaves the ledger as it was.

    Reserving again exactly the cards a workload holds changes nothing.
    """
    if not reservations or len(reservations) != len(gpus):
        raise ValueError(f"{len(reservations)} reservations for {len(gpus)} cards")
    if len({(r.workload, r.machine) for r in reservations}) > 1:
        raise ValueError("a split is one workload's, on one machine")
    workload = reservations[0].workload
    if len({r.gpu_uuid for r in reservations}) < len(reservations):
        raise ValueError(f"{workload} names a card twice")
    # the ledger's index says at once whether it holds anything (most admissions: nothing)
    held = (
        set()
        if ledger.of_workload(workload) is None
        else {r for r in ledger.reservations if r.workload == workload}
    )
    if held == set(reservations):
        return Success(ledger)
    if held:
        raise ValueError(
            f"{workload} already holds {min(held, key=str).gpu_uuid}; release it first"
        )
    made = ledger
    for reservation, gpu in zip(reservations, gpus, strict=True):
        refused = card_refusal(made, reservation, gpu)
        if refused is not None:
            return Failure(refused)
        made = made.added(reservation)
    return Success(made)


def card_refusal(ledger: Ledger, reservation: Reservation, gpu: Gpu) -> Refusal | None:
    """Why this card cannot take this reservation (held, or too small), or None."""
    if reservation.gpu_uuid != gpu.uuid:
        raise ValueError(f"reservation for {reservation.gpu_uuid} checked against {gpu.uuid}")
    holder = ledger.holder(gpu.uuid)
    if holder is not None:
        return Refusal.of(
            ReasonCode.CARD_HELD,
            f"{gpu.uuid} on {reservation.machine} is held by {holder.workload}; "
            "a card is held by one workload at a time",
        )
    if reservation.bytes > gpu.total_bytes:
        return Refusal.of(
            ReasonCode.CARD_TOO_SMALL,
            f"{reservation.workload} needs {reservation.bytes / GIB:.2f} GiB but "
            f"{gpu.uuid} has {gpu.total_bytes / GIB:.2f} GiB",
        )
    return None


def release(ledger: Ledger, workload: str) -> Ledger:
    """The ledger without this workload's reservation (unchanged if it held none)."""
    return Ledger(reservations=tuple(r for r in ledger.reservations if r.workload != workload))


def release_finished(ledger: Ledger, holding: Iterable[str]) -> Ledger:
    """Keep only reservations of workloads that still hold their card.

    ``holding`` names the workloads whose state holds a GPU (admitted ones still
    pulling their image included); every other reservation is released.
    """
    keep = frozenset(holding)
    return Ledger(reservations=tuple(r for r in ledger.reservations if r.workload in keep))


def over_committed(ledger: Ledger, fleet: Fleet) -> tuple[str, ...]:
    """Cards whose reservations break the rules: over their memory, or held twice.

    An empty tuple is the invariant every decision must keep.
    """
    bad: list[str] = []
    for _machine, gpu in fleet.gpus:
        on_card = [r for r in ledger.reservations if r.gpu_uuid == gpu.uuid]
        if len(on_card) > 1 or sum(r.bytes for r in on_card) > gpu.total_bytes:
            bad.append(gpu.uuid)
    return tuple(bad)
