"""The cluster ports' contract suite, run again against the Kubernetes adapters on a real
API server (etcd, kube-apiserver, KWOK).

Every test of tests/contract/test_cluster_ports.py that takes the ``cluster``
fixture is collected here too, unchanged: the ``cluster`` fixture below replaces
the contract module's (the in-memory fake) with the adapters on the cluster, so
the fake and the adapters are held to the same tests.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.kube import events as kube_events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.events import KubeEventLog
from nodeau.adapters.kube.health_store import KubeHealthRecords
from nodeau.adapters.kube.ledger import KubeReservationLedger
from nodeau.adapters.kube.marks import KubeFleetMarks
from nodeau.adapters.kube.pods import KubeServerPods
from nodeau.adapters.kube.reports import KubeMachineReports
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from tests.contract import test_cluster_ports as contract
from tests.support.fakes import StepClock
from tests.support.kube_nodes import kwok_node, wait_for

CONTRACT: dict[str, Callable[..., None]] = {
    name: test
    for name, test in vars(contract).items()
    if name.startswith("test_") and "cluster" in inspect.signature(test).parameters
}
globals().update(CONTRACT)


class KubeHarness:
    """The Kubernetes adapters on one API client, and KWOK for the machines."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.store = KubeStateStore(api, clock=StepClock(start=contract.START), identity="c")
        self.objects = KubeWorkloadObjects(api, identity="c")
        self.pods = KubeServerPods(api)
        self.marks = KubeFleetMarks(api)
        self.reports = KubeMachineReports(api)
        self.health = KubeHealthRecords(api)
        self.ledger = KubeReservationLedger(api)
        self.events = KubeEventLog(api, identity="c")

    def add_node(self, name: str, *, control_plane: bool = False) -> None:
        labels = {r.CONTROL_PLANE_LABEL: ""} if control_plane else {}
        core: Any = client.CoreV1Api(self.api)  # plain dict bodies
        core.create_node(kwok_node(name, labels))

    def said(self, workload: str) -> list[str]:
        return [e.text for e in kube_events.read(self.api, workload)]

    def settle(self, done: Callable[[], bool], what: str) -> None:
        wait_for(done, what)


@pytest.fixture
def cluster(fresh_fleet: client.ApiClient) -> KubeHarness:
    return KubeHarness(fresh_fleet)


def test_every_contract_test_runs_here() -> None:
    assert len(CONTRACT) >= 14
    assert all(globals()[name] is test for name, test in CONTRACT.items())
