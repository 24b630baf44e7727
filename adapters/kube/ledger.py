"""The reservation ledger in the cluster: one ConfigMap, replaced under its resourceVersion.

``read_state`` reads it with every workload object: what one admission decides on.

Decisions recorded here (docs/adr/0004-fleet-on-kubernetes.md):

* ConfigMap ``nodeau-ledger`` in ``nodeau-system``, key ``reservations``: a JSON
  list of ``{workload, machine, gpu_uuid, bytes}`` sorted by workload, so two
  ledgers with the same reservations are the same text.
* A write names the resourceVersion it read; the API server refuses it with a
  409 if anyone wrote in between, and that is ``Conflict`` for the caller, who
  reads again and decides again. The first write creates the ConfigMap, and two
  first writes racing are a conflict the same way.
* A reservation is backed when its workload's object records an admission of
  exactly that reservation and a record that still holds its card; any other is
  a leftover (of a crash between the ledger write and the status write, or of an
  admission still in flight).
* Beside each reservation the same ConfigMap keeps, under key ``claims``, which
  controller wrote it and when (``{workload: {by, at}}``). Between its ledger
  write and its status write an admission is "in flight"; a second controller
  that meets that unbacked reservation leaves it alone for ``CLAIM_GRACE``
  rather than taking it for a crash's leftover (state_store.py).
* A ConfigMap that is absent is an empty ledger; one that does not read is a
  StateError naming it, never an empty ledger (that would free every card).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from attrs import frozen

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.config_maps import read_config_map, write_config_map
from nodeau.adapters.kube.objects import KubeObject, list_objects, record_of
from nodeau.adapters.record_json import RecordError, from_plain, to_plain
from nodeau.domain.recording import Backing, Claim
from nodeau.domain.recording import leftovers as domain_leftovers
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import FINISHED, WorkloadKind
from nodeau.ports.state import Snapshot, StateError, WorkloadRecord

WHERE = f"ConfigMap {r.NAMESPACE}/{r.LEDGER_CONFIGMAP}"
CLAIMS_KEY = "claims"


@frozen(kw_only=True)
class LedgerRead:
    """The reservations as read, and the version a write must name to replace them."""

    reservations: tuple[Reservation, ...]
    version: str | None  # None: there is no ConfigMap yet
    claims: Mapping[str, Claim] = {}


def read_ledger(api: Any) -> LedgerRead:
    """The ledger as it is now."""
    found = read_config_map(api, r.LEDGER_CONFIGMAP, "read the reservation ledger")
    if found is None:
        return LedgerRead(reservations=(), version=None)
    data, version = found
    return LedgerRead(
        reservations=parse(data.get(r.LEDGER_KEY, "[]")),
        version=version,
        claims=parse_claims(data.get(CLAIMS_KEY, "{}")),
    )


def write_ledger(
    api: Any,
    reservations: tuple[Reservation, ...],
    version: str | None,
    claims: Mapping[str, Claim] | None = None,
) -> None:
    """Replace the ledger read at ``version``; Conflict if it changed since.

    ``claims`` are kept for the workloads that still hold a reservation only."""
    write_config_map(
        api,
        r.LEDGER_CONFIGMAP,
        {
            r.LEDGER_KEY: text_of(reservations),
            CLAIMS_KEY: claims_text(claims or {}, reservations),
        },
        version,
        "write the reservation ledger",
    )


def text_of(reservations: tuple[Reservation, ...]) -> str:
    """The ledger's JSON text: sorted by workload, one object per reservation."""
    ordered = tuple(sorted(reservations, key=lambda x: x.workload))
    return json.dumps(to_plain(ordered, tuple[Reservation, ...]), sort_keys=True)


def claims_text(claims: Mapping[str, Claim], reservations: tuple[Reservation, ...]) -> str:
    """The claims' JSON text, for the workloads that hold a reservation, sorted."""
    holding = {x.workload for x in reservations}
    kept = {name: claims[name] for name in sorted(claims) if name in holding}
    return json.dumps(to_plain(kept, dict[str, Claim]), sort_keys=True)


def parse_claims(text: str) -> dict[str, Claim]:
    """Claims from the ledger's text; StateError naming the ConfigMap if they do not read."""
    try:
        return from_plain(json.loads(text), dict[str, Claim], f"{WHERE} key {CLAIMS_KEY}")
    except (ValueError, RecordError) as exc:
        raise StateError(f"{WHERE} key {CLAIMS_KEY} does not read: {exc}") from exc


def parse(text: str) -> tuple[Reservation, ...]:
    """Reservations from the ledger's text; StateError naming the ConfigMap if it does not read."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise StateError(f"{WHERE} key {r.LEDGER_KEY} is not JSON ({exc})") from exc
    if not isinstance(raw, list):
        raise StateError(f"{WHERE} key {r.LEDGER_KEY} is not a list of reservations")
    try:
        found = from_plain(raw, tuple[Reservation, ...], f"{WHERE} key {r.LEDGER_KEY}")
    except RecordError as exc:
        raise StateError(" ".join(str(exc).split())) from exc
    return tuple(sorted(found, key=lambda x: x.workload))


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


@frozen(kw_only=True)
class Reading:
    """The ledger and the objects, read once for one decision."""

    ledger: LedgerRead
    objects: tuple[KubeObject, ...]
    records: tuple[WorkloadRecord, ...]
    leftovers: frozenset[str]

    def snapshot(self, dropping: frozenset[str] = frozenset()) -> Snapshot:
        """The snapshot, without the leftovers of the workloads named in ``dropping``."""
        drop = dropping & self.leftovers
        kept = tuple(x for x in self.ledger.reservations if x.workload not in drop)
        return Snapshot(ledger=Ledger(reservations=kept), workloads=self.records)

    def of(self, kind: WorkloadKind, name: str) -> KubeObject | None:
        return next((o for o in self.objects if (o.kind, o.name) == (kind, name)), None)


def read_state(api: Any) -> Reading:
    """The ledger, then every object, read for one decision."""
    ledger = read_ledger(api)
    objects = list_objects(api)
    records = tuple(record_of(o) for o in objects if "record" in o.status)
    return Reading(
        ledger=ledger,
        objects=objects,
        records=tuple(sorted(records, key=lambda x: x.workload.name)),
        leftovers=leftovers(ledger.reservations, objects),
    )


class KubeReservationLedger:
    """``ports.cluster.ReservationLedger`` on ConfigMap ``nodeau-ledger``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def read(self) -> Ledger:
        """The reservations now; empty before the first admission."""
        return Ledger(reservations=read_ledger(self._api).reservations)
