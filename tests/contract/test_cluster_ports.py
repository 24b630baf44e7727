"""The cluster ports' contract, run against the in-memory fake.

The tests live in tests/support/contracts/cluster_ports_contract.py and take a ``cluster``
(a ``Harness``: the role ports, their state store, the world around a cluster);
tests/kube/test_cluster_ports_contract.py runs them on the Kubernetes adapters.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nodeau.domain.lifecycle import ServerRestarts
from nodeau.domain.workloads import WorkloadKind
from tests.support.clock import ticking
from tests.support.contracts import cluster_ports_contract as contract
from tests.support.contracts import suite_of
from tests.support.contracts.cluster_ports_contract import START, Harness
from tests.support.fakes.fake_cluster import FakeCluster


class FakeHarness(FakeCluster):
    def said(self, workload: str) -> list[str]:
        ours = [s.message for s in self.events.said if s.workload == workload]
        return [e.text for e in self.store.events(workload)] + ours

    def settle(self, done: Callable[[], bool], what: str) -> None:
        self.pods.run()
        assert done(), what

    def kubelet_says(
        self, kind: WorkloadKind, workload: str, restarts: ServerRestarts, *, ready: bool
    ) -> None:
        self.pods.report(kind, workload, restarts, ready=ready)

    def logs_unserved(self, machine: str) -> None:
        self.pods.logs_unserved.add(machine)


@pytest.fixture
def cluster() -> Harness:
    return FakeHarness(ticking(START))


CONTRACT = suite_of(contract, "cluster")
globals().update(CONTRACT)
