"""Reservations: the ledger of who holds which card, and how much of it.

The ledger, not a reading taken from a card, is how Nodeau attributes memory:
a workload still pulling its image holds nothing on the card yet, but it holds
its reservation. A GPU is held by exactly one workload at a time: no sharing,
time-slicing or partitioning.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

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
        return self._indexed().holder.get(gpu_uuid)

    def of_workload(self, workload: str) -> Reservation | None:
        return self._indexed().of_workload.get(workload)

    def reserved_bytes(self, gpu_uuid: str) -> int:
        return self._indexed().reserved.get(gpu_uuid, 0)

    def on_machine(self, machine: str) -> tuple[Reservation, ...]:
        return tuple(self._indexed().on_machine.get(machine, ()))

    def _indexed(self) -> _LedgerIndex:
        index = self._index
        if index is None:
            index = _LedgerIndex(self.reservations)
            object.__setattr__(self, "_index", index)
        return index


class _LedgerIndex:
    """A ledger's reservations by card, by workload and by machine, in the ledger's order."""

    def __init__(self, reservations: tuple[Reservation, ...]) -> None:
        self.holder: dict[str, Reservation] = {}
        self.of_workload: dict[str, Reservation] = {}
        self.reserved: dict[str, int] = {}
        self.on_machine: dict[str, list[Reservation]] = {}
        for r in reservations:
            self._add(r)

    def _add(self, r: Reservation) -> None:
        self.holder.setdefault(r.gpu_uuid, r)
        self.of_workload.setdefault(r.workload, r)
        self.reserved[r.gpu_uuid] = self.reserved.get(r.gpu_uuid, 0) + r.bytes
        self.on_machine[r.machine] = [*self.on_machine.get(r.machine, ()), r]

    def with_(self, r: Reservation) -> _LedgerIndex:
        """This index with one more reservation, last (copied, not walked again)."""
        index = _LedgerIndex(())
        index.holder = dict(self.holder)
        index.of_workload = dict(self.of_workload)
        index.reserved = dict(self.reserved)
        index.on_machine = dict(self.on_machine)
        index._add(r)
        return index


def free_bytes(ledger: Ledger, gpu: Gpu) -> int:
    """A card's free memory according to the ledger: nothing if a workload holds it."""
    return 0 if ledger.holder(gpu.uuid) is not None else gpu.total_bytes


def reserve(ledger: Ledger, reservation: Reservation, gpu: Gpu) -> Result[Ledger, Refusal]:
    """Record a reservation, or refuse it if the card is held or too small.

    Reserving again exactly what a workload already holds changes nothing;
    a workload holds one card at a time.
    """
    if reservation.gpu_uuid != gpu.uuid:
        raise ValueError(f"reservation for {reservation.gpu_uuid} checked against {gpu.uuid}")
    existing = ledger.of_workload(reservation.workload)
    if existing == reservation:
        return Success(ledger)
    if existing is not None:
        raise ValueError(
            f"{reservation.workload} already holds {existing.gpu_uuid}; release it first"
        )
    holder = ledger.holder(gpu.uuid)
    if holder is not None:
        return Failure(
            Refusal.of(
                ReasonCode.CARD_HELD,
                f"{gpu.uuid} on {reservation.machine} is held by {holder.workload}; "
                "a card is held by one workload at a time",
            )
        )
    if reservation.bytes > gpu.total_bytes:
        return Failure(
            Refusal.of(
                ReasonCode.CARD_TOO_SMALL,
                f"{reservation.workload} needs {reservation.bytes / GIB:.2f} GiB but "
                f"{gpu.uuid} has {gpu.total_bytes / GIB:.2f} GiB",
            )
        )
    return Success(ledger.added(reservation))


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
