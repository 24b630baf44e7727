"""The split contract (tests/support/contracts/split_state_contract.py) on SQLite and the
in-memory fake; and SQLite's own: a home made when a workload held one card keeps its rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from attrs import evolve
from returns.result import Result

from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger
from nodeau.ports.state import Admission, Snapshot, StateStore
from tests.support.contracts import split_state_contract as contract
from tests.support.contracts import suite_of
from tests.support.contracts.split_state_contract import NOW, decide_big
from tests.support.fakes.fake_state import FakeStateStore
from tests.support.real.sqlite_store import admitted, store_at

CONTRACT = suite_of(contract, "store")
globals().update(CONTRACT)


@pytest.fixture(params=["sqlite", "fake"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    yield (
        store_at(tmp_path / "state.sqlite3")
        if request.param == "sqlite"
        else FakeStateStore(clock=lambda: NOW)
    )


def test_a_home_from_before_splits_keeps_its_reservations(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    chat = admitted(path).snapshot().ledger  # then its table as it was made before splits:
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(
        """
        BEGIN;
        ALTER TABLE reservations RENAME TO newer;
        CREATE TABLE reservations (
            workload TEXT PRIMARY KEY REFERENCES workloads(name), machine TEXT NOT NULL,
            gpu_uuid TEXT NOT NULL UNIQUE, bytes INTEGER NOT NULL CHECK (bytes > 0)
        );
        INSERT INTO reservations SELECT workload, machine, gpu_uuid, bytes FROM newer;
        DROP TABLE newer;
        COMMIT;
        """
    )
    db.close()
    store_at(path)
    store = store_at(path)  # a second open finds it done
    assert store.snapshot().ledger == chat and len(chat.reservations) == 1
    admission = store.admit("big", decide_big("big")).unwrap()
    assert len(admission.record.workload.cards) == 2
    assert store.snapshot().ledger.reservations == (
        *chat.reservations,
        *admission.placement.reservations,
    )
    slots = sqlite3.connect(path).execute("SELECT workload, slot FROM reservations").fetchall()
    assert sorted(slots) == [("big", 0), ("big", 1), ("chat", 0)]


def test_a_split_whose_record_names_other_cards_is_a_mistake(tmp_path: Path) -> None:
    store = store_at(tmp_path / "state.sqlite3")

    def swapped(snapshot: Snapshot) -> Result[Admission, Refusal]:
        def other_cards(a: Admission) -> Admission:
            w = a.record.workload
            moved = evolve(w, more_cards=("GPU-2",))
            return evolve(a, record=evolve(a.record, workload=moved))

        return decide_big("big")(snapshot).map(other_cards)

    with pytest.raises(ValueError) as caught:
        store.admit("big", swapped)
    assert str(caught.value) == (
        "workload big is on GPU-0, GPU-2 (m1) but its reservations are for GPU-0 (m1), GPU-1 (m1)"
    )
    assert store.snapshot().ledger == Ledger()
