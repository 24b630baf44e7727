"""A row of the one-machine ledger that does not read (adapters/sqlite_state.py), word for
word: each of cattrs' complaints joined by "; ", and a value of the wrong shape altogether
(cattrs' generated code reads a JSON array as a mapping) named with Python's own words."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.ports.state import StateError
from tests.contract.test_state_store import admit
from tests.support.fakes import StepClock


def unreadable(tmp_path: Path, change: str) -> str:
    """What reading the ledger says once ``change`` was made to chat's record by hand."""
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=StepClock())
    admit(store, "chat")
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(change)
    finally:
        db.close()
    with pytest.raises(StateError) as caught:
        store.snapshot()
    return str(caught.value).removeprefix(f"{path}: ")


def test_a_record_with_two_wrong_fields_names_both_joined_by_a_semicolon(tmp_path: Path) -> None:
    said = unreadable(
        tmp_path,
        "UPDATE workloads SET record = "
        "json_set(record, '$.workload.state', 'dancing', '$.workload.kind', 'party')",
    )
    assert said == (
        "the record of chat cannot be read (invalid value for type, expected WorkloadKind @ "
        "$.workload.kind; invalid value for type, expected WorkloadState @ $.workload.state)"
    )


def test_a_record_that_is_an_array_is_named_in_pythons_words(tmp_path: Path) -> None:
    said = unreadable(tmp_path, "UPDATE workloads SET record = '[1, 2]'")
    assert said == "the record of chat cannot be read ('list' object has no attribute 'keys')"
