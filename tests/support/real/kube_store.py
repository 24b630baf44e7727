"""Helpers for the tests of ``KubeStateStore``: the ledger as the cluster keeps it, and the
state a crash leaves.

The ledger is one ``Reservation`` object per claimed card (docs/adr/0017); tests read and
plant it through these helpers only, never by the objects' names or fields.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from attrs import evolve

from nodeau.adapters.kube.claims import claim
from nodeau.adapters.kube.ledger import read_ledger
from nodeau.domain.recording import Claim
from nodeau.domain.reservations import Reservation
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import WorkloadRecord

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def stopped(record: WorkloadRecord) -> WorkloadRecord:
    """A change that finishes a workload (for ``release``)."""
    return evolve(record, workload=evolve(record.workload, state=WorkloadState.STOPPED))


def reservations(api: Any) -> tuple[Reservation, ...]:
    """The reservations the cluster holds now, sorted by workload."""
    return read_ledger(api).reservations


def claims(api: Any) -> dict[str, Claim]:
    """Who claimed each workload's card, and when."""
    return dict(read_ledger(api).claims)


def plant(api: Any, reservation: Reservation, *, by: str = "crashed", at: datetime) -> None:
    """A claim of ``reservation``'s card by controller ``by`` at ``at``, with no status
    written: what a controller has done between its claim and its status write."""
    claim(api, reservation, Claim(by=by, at=at))


def crash_after_the_ledger(
    api: Any, reservation: Reservation, *, by: str = "crashed", at: datetime = LONG_AGO
) -> None:
    """What a controller that died between its claim and its status write left."""
    plant(api, reservation, by=by, at=at)
