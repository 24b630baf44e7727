"""The one-machine store's reservations table across opens: a home opened again keeps every
card of a split in slot order, and a home made when a workload held one card whose rows cannot
be carried over says so in one line, keeping its table as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nodeau.ports.state import StateError
from tests.support.contracts.split_state_contract import decide_big
from tests.support.real.sqlite_store import admitted, sql, store_at

ONE_CARD_TABLE = (
    "CREATE TABLE reservations (workload TEXT PRIMARY KEY REFERENCES workloads(name), "
    "machine TEXT NOT NULL, gpu_uuid TEXT NOT NULL UNIQUE, bytes INTEGER NOT NULL)"
)


def rows(path: Path, query: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def test_a_home_opened_again_keeps_every_card_of_a_split_in_slot_order(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    admission = store_at(path).admit("big", decide_big("big")).unwrap()
    again = store_at(path)
    assert again.snapshot().ledger.reservations == admission.placement.reservations
    assert rows(path, "SELECT workload, slot, gpu_uuid FROM reservations ORDER BY slot") == [
        ("big", 0, "GPU-0"),
        ("big", 1, "GPU-1"),
    ]


def test_one_card_rows_that_cannot_be_carried_over_are_said_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    chat = admitted(path).snapshot().ledger.reservations  # then its table as before splits:
    sql(path, "ALTER TABLE reservations RENAME TO newer")
    sql(path, ONE_CARD_TABLE)
    sql(path, "INSERT INTO reservations SELECT workload, machine, gpu_uuid, bytes FROM newer")
    sql(path, "DROP TABLE newer")
    # a row no workload backs, written where foreign keys were not enforced (SQLite's default)
    sql(path, "INSERT INTO reservations VALUES ('ghost', 'm1', 'GPU-9', 1024)")
    with pytest.raises(StateError) as caught:
        store_at(path)
    assert str(caught.value) == (
        f"{path}: cannot let a workload hold several cards (FOREIGN KEY constraint failed)"
    )
    assert rows(path, "SELECT sql FROM sqlite_master WHERE name = 'reservations'") == [
        (ONE_CARD_TABLE,)
    ]
    assert rows(path, "SELECT workload, gpu_uuid FROM reservations ORDER BY rowid") == [
        *((r.workload, r.gpu_uuid) for r in chat),
        ("ghost", "GPU-9"),
    ]
