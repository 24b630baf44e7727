"""Helpers for the tests of ``KubeStateStore``: a racing process, and the state a crash leaves.

``race`` is the body of one racing process of tests/kube/test_state_store_race.py
(started with "spawn", like separate controllers): it reaches the API server
through the kubeconfig, as a controller outside the cluster would, and tries
to admit a workload of its own each round.
"""

from __future__ import annotations

from datetime import UTC, datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from attrs import evolve
from returns.pipeline import is_successful

from nodeau.adapters.kube.client import connect
from nodeau.adapters.kube.ledger import read_ledger, write_ledger
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.domain.reservations import Reservation
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import WorkloadRecord
from tests.support.admissions import BOUND_S, decider, fleet_of


def stopped(record: WorkloadRecord) -> WorkloadRecord:
    """A change that finishes a workload (for ``release``)."""
    return evolve(record, workload=evolve(record.workload, state=WorkloadState.STOPPED))


def crash_after_the_ledger(api: Any, reservation: Reservation) -> None:
    """What a controller that died between its ledger write and its status write left."""
    read = read_ledger(api)
    write_ledger(api, (*read.reservations, reservation), read.version)


def race(
    kubeconfig: str,
    index: int,
    rounds: int,
    cards: int,
    pause_s: float,
    start: Barrier,
    results: Queue[tuple[int, int, str, str]],
) -> None:
    """One racing controller: each round, wait for the start, then try to admit a workload.

    Puts ``(round, index, name, outcome)`` on ``results``; the outcome is
    ``won``, a refusal's reason code, or ``error: ...``.
    """
    connection = connect(Path(kubeconfig))
    store = KubeStateStore(
        connection.api, clock=lambda: datetime.now(UTC), identity=f"racer-{index}"
    )
    fleet = fleet_of(cards)
    for round_ in range(rounds):
        start.wait(timeout=BOUND_S)
        name = f"r{round_:03d}-p{index:02d}"
        try:
            outcome = store.admit(decider(name, fleet, datetime.now(UTC), pause_s=pause_s))
            said = "won" if is_successful(outcome) else outcome.failure().code.value
        except Exception as exc:
            said = f"error: {exc!r}"
        results.put((round_, index, name, said))
