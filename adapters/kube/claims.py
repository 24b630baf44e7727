"""Reservations in the cluster: one ``Reservation`` object per card, created to claim it.

Why it is so: docs/adr/decisions/adapters-kube.md (claims.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from attrs import frozen
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import (
    REQUEST_TIMEOUT,
    Conflict,
    NotFound,
    api_errors,
    or_none,
    send_json,
)
from nodeau.domain.recording import Claim
from nodeau.domain.reservations import Reservation
from nodeau.ports.state import StateError

KIND = "Reservation"
PLURAL = "reservations"
PAGE = 500  # objects per list page
HERE = (r.GROUP, r.VERSION, r.NAMESPACE, PLURAL)
COLLECTION = f"/apis/{{group}}/{{version}}/namespaces/{{namespace}}/{PLURAL}"


class CardTaken(Conflict):
    """The card's Reservation exists already: another decision claimed it first."""


@frozen(kw_only=True)
class Held:
    """One card's Reservation as read: what it reserves, who claimed it, and its version."""

    reservation: Reservation
    claim: Claim
    name: str
    uid: str
    version: str


def name_of(gpu_uuid: str) -> str:
    """The Reservation's name for a card."""
    slug = re.sub(r"[^a-z0-9-]+", "-", gpu_uuid.lower()).strip("-")[:200]
    digest = hashlib.sha256(gpu_uuid.encode()).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else f"card-{digest}"


def body_of(reservation: Reservation, claim: Claim) -> dict[str, Any]:
    """The object that claims ``reservation``'s card."""
    return {
        "apiVersion": r.API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name_of(reservation.gpu_uuid),
            "namespace": r.NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "nodeau"},
        },
        "spec": {
            "workload": reservation.workload,
            "machine": reservation.machine,
            "gpuUUID": reservation.gpu_uuid,
            "bytes": reservation.bytes,
            "claimedBy": claim.by,
            "claimedAt": claim.at.isoformat(),
        },
    }


def held_of(body: dict[str, Any]) -> Held:
    """The claim an object records; StateError naming it when it does not read."""
    meta = body.get("metadata") or {}
    name = str(meta.get("name", "?"))
    spec = body.get("spec") or {}
    try:
        reservation = Reservation(
            workload=str(spec["workload"]),
            machine=str(spec["machine"]),
            gpu_uuid=str(spec["gpuUUID"]),
            bytes=int(spec["bytes"]),
        )
        claim = Claim(by=str(spec["claimedBy"]), at=datetime.fromisoformat(spec["claimedAt"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"{KIND} {r.NAMESPACE}/{name} does not read: {exc}") from exc
    if name_of(reservation.gpu_uuid) != name:
        raise StateError(
            f"{KIND} {r.NAMESPACE}/{name} reserves {reservation.gpu_uuid}, whose Reservation "
            f"is called {name_of(reservation.gpu_uuid)}"
        )
    return Held(
        reservation=reservation,
        claim=claim,
        name=name,
        uid=str(meta.get("uid", "")),
        version=str(meta.get("resourceVersion", "")),
    )


def assumed_claim(reservation: Reservation, by: Claim) -> Held:
    """The claim an admission in flight is about to make, held by its decision until the
    API server answers (no uid or version yet: it is never freed as it is)."""
    return Held(
        reservation=reservation, claim=by, name=name_of(reservation.gpu_uuid), uid="", version=""
    )


def claim(api: Any, reservation: Reservation, by: Claim) -> Held:
    """Create the card's Reservation; CardTaken when the card is claimed already."""
    what = f"claim {reservation.gpu_uuid} for {reservation.workload}"
    try:
        with api_errors(what):  # plain JSON: the typed method's models cost more than the claim
            made = send_json(api, "POST", COLLECTION, r.CUSTOM_PATH, body_of(reservation, by))
    except Conflict as exc:
        raise CardTaken(what, exc.status, exc.message) from exc
    return held_of(made)


def read_claim(api: Any, gpu_uuid: str) -> Held | None:
    """The card's Reservation, or None when the card is free."""
    custom: Any = client.CustomObjectsApi(api)
    found = or_none(
        f"read the Reservation of {gpu_uuid}",
        lambda: custom.get_namespaced_custom_object(
            *HERE, name_of(gpu_uuid), _request_timeout=REQUEST_TIMEOUT
        ),
    )
    return None if found is None else held_of(found)


def free(api: Any, held: Held) -> bool:
    """Delete the Reservation exactly as read; False when it is gone or was claimed again."""
    custom: Any = client.CustomObjectsApi(api)
    preconditions = {"uid": held.uid, "resourceVersion": held.version}
    try:
        with api_errors(f"free {held.reservation.gpu_uuid} of {held.reservation.workload}"):
            custom.delete_namespaced_custom_object(
                *HERE,
                held.name,
                body={"preconditions": preconditions},
                _request_timeout=REQUEST_TIMEOUT,
            )
    except (NotFound, Conflict):
        return False
    return True


def list_claims(api: Any) -> tuple[Held, ...]:
    """Every card's Reservation, sorted by workload then card."""
    found = tuple(held_of(item) for item in _pages(api))
    return tuple(sorted(found, key=lambda h: (h.reservation.workload, h.reservation.gpu_uuid)))


def _pages(api: Any) -> Iterator[dict[str, Any]]:
    custom: Any = client.CustomObjectsApi(api)
    token: str | None = None
    while True:
        with api_errors("read the reservation ledger"):
            page = custom.list_namespaced_custom_object(
                *HERE, limit=PAGE, _continue=token, _request_timeout=REQUEST_TIMEOUT
            )
        yield from page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return
