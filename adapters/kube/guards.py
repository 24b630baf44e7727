"""What an admission in the cluster checks before it writes: names, claims, recorded cards.

Why it is so: docs/adr/decisions/adapters-kube.md (guards.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from nodeau.adapters.kube.ledger import LedgerRead, backing_of
from nodeau.adapters.kube.objects import KubeObject, record_of
from nodeau.domain.recording import holds_other_card as recorded_other_card
from nodeau.domain.recording import in_flight
from nodeau.domain.workloads import FINISHED, WorkloadKind
from nodeau.ports.state import Admission, StateError, WorkloadRecord


class AdmissionInFlight(StateError):
    """Another controller is between its ledger write and its status write for this workload."""


def holds_other_card(current: KubeObject, admission: Admission) -> bool:
    """Whether the object records a live admission of a different reservation."""
    return recorded_other_card(backing_of(current), admission)


def check_name_free(
    found: Mapping[WorkloadKind, KubeObject | None], record: WorkloadRecord
) -> None:
    """StateError when the other kind's object of the same name (``found``, by kind) holds
    a card."""
    name = record.workload.name
    for kind in WorkloadKind:
        other = None if kind is record.workload.kind else found.get(kind)
        if other is None or "record" not in other.status:
            continue
        if record_of(other).workload.state not in FINISHED:
            raise StateError(
                f"{other.title} already holds a card under the name {name}; "
                "a GPUService and a BatchJob cannot share a name"
            )


def check_in_flight(ledger: LedgerRead, name: str, now: datetime, identity: str) -> None:
    """AdmissionInFlight when ``name``'s unbacked reservation is another controller's fresh
    claim: its admission is in flight, and its decision will stand."""
    claim = ledger.claims.get(name)
    if claim is not None and in_flight(claim, identity, now):
        raise AdmissionInFlight(
            f"{name} is being admitted by {claim.by} (since {claim.at.isoformat()}); "
            "its decision stands"
        )
