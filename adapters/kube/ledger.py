"""The reservation ledger in the cluster: every card's ``Reservation`` object, listed.

``read_state`` reads it with every workload object: what the controller's snapshot shows.

Decisions recorded here (docs/adr/0017-a-ledger-that-scales.md; the objects are
``claims.py``'s):

* The ledger is the Reservations listed (one per card, ``claims.list_claims``): no object
  grows with the fleet, and none is written by every admission.
* A reservation is backed when its workload's object records an admission of exactly
  that reservation and a record that still holds its card; any other is a leftover (of a
  crash between the claim and the status write, or of an admission still in flight).
  Each claim says which controller made it and when, so a leftover is told from an
  admission in flight by ``CLAIM_GRACE`` (state_store.py).
* The Reservations are listed before the objects: a status written after a claim was
  listed is seen, so an admission in flight is never mistaken for a leftover by the order
  of the reads.
* A Reservation that does not read is a StateError naming it, never a free card.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from attrs import frozen

from nodeau.adapters.kube.claims import Held, list_claims
from nodeau.adapters.kube.objects import KubeObject, list_objects, record_of
from nodeau.adapters.record_json import RecordError, from_plain
from nodeau.domain.recording import Backing, Claim
from nodeau.domain.recording import leftovers as domain_leftovers
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import FINISHED, WorkloadKind
from nodeau.ports.state import Snapshot, StateError, WorkloadRecord


@frozen(kw_only=True)
class LedgerRead:
    """The Reservations as read: each card's claim, and the reservations they make."""

    held: tuple[Held, ...] = ()

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        return tuple(h.reservation for h in self.held)

    @property
    def claims(self) -> Mapping[str, Claim]:
        """Who claimed each workload's card, and when (a workload's latest claim)."""
        ordered = sorted(self.held, key=lambda h: h.claim.at)
        return {h.reservation.workload: h.claim for h in ordered}

    def of_workload(self, workload: str) -> tuple[Held, ...]:
        return tuple(h for h in self.held if h.reservation.workload == workload)

    def without(self, gone: Iterable[Held]) -> LedgerRead:
        names = {h.name for h in gone}
        return LedgerRead(held=tuple(h for h in self.held if h.name not in names))

    def with_(self, more: Held) -> LedgerRead:
        return LedgerRead(held=(*self.without((more,)).held, more))

    def ledger(self) -> Ledger:
        ordered = sorted(self.reservations, key=lambda x: (x.workload, x.gpu_uuid))
        return Ledger(reservations=tuple(ordered))


def read_ledger(api: object) -> LedgerRead:
    """The ledger as it is now: every card's Reservation."""
    return LedgerRead(held=list_claims(api))


def backing_of(found: KubeObject) -> Backing:
    """What the object's status says its workload holds (the domain's ``Backing``)."""
    status = found.status
    state = (status.get("record") or {}).get("workload", {}).get("state")
    if "admission" not in status or state is None or state in {s.value for s in FINISHED}:
        return Backing(workload=found.name, holds=None)
    try:
        held = from_plain(status.get("reservation"), Reservation, f"{found.title}'s reservation")
    except RecordError as exc:
        raise StateError(" ".join(str(exc).split())) from exc
    return Backing(workload=found.name, holds=held)


def leftovers(
    reservations: tuple[Reservation, ...], objects: tuple[KubeObject, ...]
) -> frozenset[str]:
    """The workloads whose reservation no object's recorded admission backs."""
    return domain_leftovers(reservations, (backing_of(o) for o in objects))


def unbacked(held: Iterable[Held], objects: Iterable[KubeObject]) -> tuple[Held, ...]:
    """The claims whose reservation no object's recorded admission backs, one by one (a
    workload may hold a backed claim and a leftover at once)."""
    backed = {(b.workload, b.holds) for b in map(backing_of, objects) if b.holds is not None}
    return tuple(h for h in held if (h.reservation.workload, h.reservation) not in backed)


@frozen(kw_only=True)
class Reading:
    """The ledger and the objects, read once for one decision."""

    ledger: LedgerRead
    objects: tuple[KubeObject, ...]
    records: tuple[WorkloadRecord, ...]
    leftovers: tuple[Held, ...]

    def snapshot(self, dropping: Iterable[Held] = ()) -> Snapshot:
        """The snapshot, without the claims in ``dropping``."""
        kept = self.ledger.without(dropping)
        return Snapshot(ledger=kept.ledger(), workloads=self.records)

    def of(self, kind: WorkloadKind, name: str) -> KubeObject | None:
        return next((o for o in self.objects if (o.kind, o.name) == (kind, name)), None)


def read_state(api: object) -> Reading:
    """The Reservations, then every object, read for one snapshot."""
    ledger = read_ledger(api)
    objects = list_objects(api)
    records = tuple(record_of(o) for o in objects if "record" in o.status)
    return Reading(
        ledger=ledger,
        objects=objects,
        records=tuple(sorted(records, key=lambda x: x.workload.name)),
        leftovers=unbacked(ledger.held, objects),
    )


class KubeReservationLedger:
    """``ports.cluster.ReservationLedger`` on the cards' Reservation objects."""

    def __init__(self, api: object) -> None:
        self._api = api

    def read(self) -> Ledger:
        """The reservations now; empty before the first admission."""
        return read_ledger(self._api).ledger()
