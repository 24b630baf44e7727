"""Helpers for the tests of ``KubeStateStore``: a racing process, and the state a crash leaves.

``race`` is the body of one racing process of tests/kube/test_state_store_race.py
(started with "spawn", like separate controllers): it reaches the API server
through the kubeconfig, as a controller outside the cluster would, and tries
to admit a workload of its own each round.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve

from nodeau.adapters.kube.ledger import read_ledger, write_ledger
from nodeau.domain.reservations import Reservation
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import WorkloadRecord


def stopped(record: WorkloadRecord) -> WorkloadRecord:
    """A change that finishes a workload (for ``release``)."""
    return evolve(record, workload=evolve(record.workload, state=WorkloadState.STOPPED))


def crash_after_the_ledger(api: Any, reservation: Reservation) -> None:
    """What a controller that died between its ledger write and its status write left."""
    read = read_ledger(api)
    write_ledger(api, (*read.reservations, reservation), read.version)
