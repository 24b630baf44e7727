"""The reservation ledger in the cluster: every card's ``Reservation`` object, listed.

Why it is so: docs/adr/decisions/adapters-kube.md (ledger.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from attrs import frozen

from nodeau.adapters.kube.claims import Held, list_claims
from nodeau.adapters.kube.informer_cache import KnownObjects
from nodeau.adapters.kube.objects import KubeObject, list_objects, record_of
from nodeau.adapters.record_json import RecordError, from_plain, unpack
from nodeau.domain.recording import Backing, Claim
from nodeau.domain.recording import leftovers as domain_leftovers
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import FINISHED, WorkloadKind
from nodeau.ports.state import Admission, Snapshot, StateError, WorkloadRecord


class LedgerRead:
    """The Reservations as read: each card's claim, and the reservations they make.

    A value: ``with_`` and ``without`` give new ones, made from this one's lookups rather
    than by walking every claim again (a fleet of thousands of cards is not walked for each
    admission): a claim added keeps the ledger this one made, with one more reservation."""

    __slots__ = ("_by_name", "_by_workload", "_ledger")

    def __init__(self, held: Iterable[Held] = ()) -> None:
        self._by_name: dict[str, Held] = {h.name: h for h in held}
        by_workload: dict[str, tuple[str, ...]] = {}
        for h in self._by_name.values():
            by_workload[h.reservation.workload] = (
                *by_workload.get(h.reservation.workload, ()),
                h.name,
            )
        self._by_workload = by_workload
        self._ledger: Ledger | None = None  # made when first asked for

    @classmethod
    def _of(
        cls,
        by_name: dict[str, Held],
        by_workload: dict[str, tuple[str, ...]],
        ledger: Ledger | None,
    ) -> LedgerRead:
        made = cls.__new__(cls)
        made._by_name, made._by_workload, made._ledger = by_name, by_workload, ledger
        return made

    @property
    def held(self) -> tuple[Held, ...]:
        return tuple(self._by_name.values())

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        return tuple(h.reservation for h in self._by_name.values())

    @property
    def claims(self) -> Mapping[str, Claim]:
        """Who claimed each workload's card, and when (a workload's latest claim)."""
        ordered = sorted(self._by_name.values(), key=lambda h: h.claim.at)
        return {h.reservation.workload: h.claim for h in ordered}

    def of_workload(self, workload: str) -> tuple[Held, ...]:
        return tuple(self._by_name[n] for n in self._by_workload.get(workload, ()))

    def without(self, gone: Iterable[Held]) -> LedgerRead:
        names = {h.name for h in gone if h.name in self._by_name}
        if not names:
            return self
        by_name = {n: h for n, h in self._by_name.items() if n not in names}
        by_workload = dict(self._by_workload)
        for name in names:
            workload = self._by_name[name].reservation.workload
            left = tuple(n for n in by_workload[workload] if n != name)
            if left:
                by_workload[workload] = left
            else:
                del by_workload[workload]
        return self._of(by_name, by_workload, None)

    def with_(self, more: Held) -> LedgerRead:
        """These claims with ``more`` (in place of the claim of the same card, if any)."""
        old = self._by_name.get(more.name)
        base = self if old is None or old.reservation == more.reservation else self.without((old,))
        by_name = {**base._by_name, more.name: more}
        by_workload = dict(base._by_workload)
        workload = more.reservation.workload
        named = by_workload.get(workload, ())
        by_workload[workload] = named if more.name in named else (*named, more.name)
        if base._ledger is None or (old is not None and base is self):
            ledger = base._ledger  # the same reservations (or none made yet)
        else:
            ledger = base._ledger.added(more.reservation)
        return self._of(by_name, by_workload, ledger)

    def ledger(self) -> Ledger:
        if self._ledger is None:
            ordered = sorted(self.reservations, key=lambda x: (x.workload, x.gpu_uuid))
            self._ledger = Ledger(reservations=tuple(ordered))
        return self._ledger


def read_ledger(api: object) -> LedgerRead:
    """The ledger as it is now: every card's Reservation."""
    return LedgerRead(held=list_claims(api))


def backing_of(found: KubeObject) -> Backing:
    """What the object's status says its workload holds (the domain's ``Backing``)."""
    status = found.status
    workload = (status.get("record") or {}).get("workload", {})
    state = workload.get("state")
    if "admission" not in status or state is None or state in {s.value for s in FINISHED}:
        return Backing(workload=found.name, holds=None)
    try:
        held = from_plain(status.get("reservation"), Reservation, f"{found.title}'s reservation")
        more = tuple(
            from_plain(x, Reservation, f"{found.title}'s reservation of a further card")
            for x in status.get("moreReservations") or ()
        )
        # a CRD from before splits pruned moreReservations: the decision still has them
        if workload.get("more_cards") and not more:
            decided = unpack(status["admission"], Admission, f"the admission of {found.title}")
            more = decided.placement.more
    except RecordError as exc:
        raise StateError(" ".join(str(exc).split())) from exc
    return Backing(workload=found.name, holds=held, more=more)


def leftovers(
    reservations: tuple[Reservation, ...], objects: tuple[KubeObject, ...]
) -> frozenset[str]:
    """The workloads whose reservation no object's recorded admission backs."""
    return domain_leftovers(reservations, (backing_of(o) for o in objects))


def unbacked(held: Iterable[Held], objects: Iterable[KubeObject]) -> tuple[Held, ...]:
    """The claims whose reservation no object's recorded admission backs, one by one (a
    workload may hold a backed claim and a leftover at once)."""
    backed = {(b.workload, x) for b in map(backing_of, objects) for x in b.every}
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


def read_state(api: object, known: KnownObjects | None = None) -> Reading:
    """The Reservations, then every object, read for one snapshot (each kind of object
    kept complete in ``known``)."""
    ledger = read_ledger(api)
    objects = list_objects(api, known)
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
