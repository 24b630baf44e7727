"""The one-machine store's failures, each one line naming its file and what it could not do.

The StateStore contract (tests/contract/test_state_store.py) proves what the store keeps;
these prove what it says when SQLite, its folder or a stored row fails it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.domain.lifecycle import with_state
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import Event, StateError
from tests.support.builders.admissions import decider, fleet_of
from tests.support.clock import ticking
from tests.support.contracts.state_store_contract import admit
from tests.support.real.sqlite_store import NOW, admitted, sql, store_at


def test_the_store_makes_every_missing_folder_of_its_file(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "state.sqlite3"
    store_at(path)
    assert path.is_file()


def test_a_folder_that_cannot_be_made_is_said(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a folder")
    path = tmp_path / "plain" / "state.sqlite3"
    with pytest.raises(StateError) as caught:
        store_at(path)
    assert str(caught.value) == f"{path}: cannot create its folder (File exists)"


def test_a_file_sqlite_cannot_open_is_said(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    path.mkdir()
    with pytest.raises(StateError) as caught:
        store_at(path)
    assert str(caught.value) == f"{path}: cannot create the tables (unable to open database file)"


@pytest.mark.parametrize(
    ("table", "what"),
    [("workloads", "read"), ("events", "read events")],
)
def test_a_failed_read_says_what_it_was_reading(tmp_path: Path, table: str, what: str) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, "PRAGMA foreign_keys=OFF")
    sql(path, f"DROP TABLE {table}")
    with pytest.raises(StateError) as caught:
        store.snapshot() if what == "read" else store.events("chat")
    assert str(caught.value) == f"{path}: cannot {what} (no such table: {table})"


def test_each_failed_write_says_what_it_was_writing(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, "DROP TABLE events")
    said = "(no such table: events)"
    with pytest.raises(StateError) as caught:
        store.record_event(Event(at=NOW, workload="chat", text="hello"))
    assert str(caught.value) == f"{path}: cannot record an event {said}"
    with pytest.raises(StateError) as caught:
        store.release("chat", lambda r: with_state(r, WorkloadState.STOPPED, NOW))
    assert str(caught.value) == f"{path}: cannot release chat {said}"
    with pytest.raises(StateError) as caught:
        store.admit("embed", decider("embed", fleet_of(2), NOW))
    assert str(caught.value) == f"{path}: cannot record an admission {said}"
    sql(path, "DROP TABLE admissions")
    with pytest.raises(StateError) as caught:
        store.admission("chat")
    assert str(caught.value) == (
        f"{path}: cannot read the admission of chat (no such table: admissions)"
    )


def test_a_failed_update_says_which_workload(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(
        path,
        "CREATE TRIGGER no_updates BEFORE UPDATE ON workloads "
        "BEGIN SELECT RAISE(ABORT, 'kept as it is'); END",
    )
    with pytest.raises(StateError) as caught:
        store.update("chat", lambda r: with_state(r, WorkloadState.SERVING, NOW))
    assert str(caught.value) == f"{path}: cannot update chat (kept as it is)"


def test_a_row_that_is_not_json_is_said_with_whose_it_is(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, "UPDATE workloads SET record = '{broken' WHERE name = 'chat'")
    with pytest.raises(StateError) as caught:
        store.snapshot()
    assert str(caught.value) == (
        f"{path}: the record of chat cannot be read (not JSON: Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1))"
    )
    with pytest.raises(StateError) as caught:
        store.update("chat", lambda r: r)
    assert str(caught.value).startswith(f"{path}: the record of chat cannot be read (not JSON")


def test_a_stored_admission_or_event_that_does_not_read_is_said(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, "UPDATE admissions SET decision = '{}' WHERE workload = 'chat'")
    with pytest.raises(StateError) as caught:
        store.admission("chat")
    assert str(caught.value).startswith(f"{path}: the admission of chat cannot be read (")
    assert "required field missing" in str(caught.value)
    sql(path, "UPDATE events SET at = 'yesterday'")
    with pytest.raises(StateError) as caught:
        store.events()
    assert str(caught.value).startswith(f"{path}: an event cannot be read (")


def test_a_decision_about_another_workload_is_a_programming_error(tmp_path: Path) -> None:
    store = store_at(tmp_path / "state.sqlite3")
    decide = decider("embed", fleet_of(1), NOW)
    with pytest.raises(ValueError) as caught:
        store.admit("chat", decide)
    assert str(caught.value) == "admit('chat') decided about 'embed'"
    assert store.snapshot().workloads == ()  # nothing recorded


def unreadable(tmp_path: Path, change: str) -> str:
    """What reading the ledger says once ``change`` was made to chat's record by hand."""
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking())
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
