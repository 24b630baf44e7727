"""The split contract (tests/support/contracts/split_state_contract.py) on a real API server:
a split's cards are claimed one Reservation each, given back when one is taken, and freed
together."""

from __future__ import annotations

import pytest
from kubernetes import client

from nodeau.adapters.kube.state_store import KubeStateStore
from tests.support.clock import ticking
from tests.support.contracts import split_state_contract as contract
from tests.support.contracts import suite_of

CONTRACT = suite_of(contract, "store")
globals().update(CONTRACT)


@pytest.fixture
def store(fresh_fleet: client.ApiClient) -> KubeStateStore:
    return KubeStateStore(fresh_fleet, clock=ticking(contract.NOW), identity="contract")


def test_every_split_contract_test_runs_here() -> None:
    assert len(CONTRACT) >= 2
    assert all(globals()[name] is test for name, test in CONTRACT.items())
