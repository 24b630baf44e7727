"""The StateStore contract, run against SQLite and the in-memory fake alike.

The contract's tests live in tests/support/contracts/state_store_contract.py (tests/kube reruns them
on a real API server); those here are SQLite's own: what lasts, what is stored, what fails.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path

import pytest
from attrs import frozen

from nodeau.adapters.sqlite_state import SqliteStateStore, _converter
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import Event, StateError, StateStore
from tests.support.clock import ticking
from tests.support.contracts import state_store_contract as contract
from tests.support.contracts import suite_of
from tests.support.contracts.state_store_contract import NOW, START, TWO_CARDS, admit, in_state
from tests.support.fakes.fake_state import FakeStateStore


@pytest.fixture(params=["sqlite", "fake"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    clock = ticking(START)
    if request.param == "sqlite":
        yield SqliteStateStore(tmp_path / "state" / "plane.sqlite3", clock=clock)
    else:
        yield FakeStateStore(clock=clock)


# the contract (tests/support/contracts/state_store_contract.py), on SQLite and the in-memory fake
CONTRACT = suite_of(contract, "store")
globals().update(CONTRACT)


# SQLite only: what lasts, what is stored, what fails


def test_reopening_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking(START))
    chat = admit(store, "chat", TWO_CARDS)
    admit(store, "embed", TWO_CARDS)
    store.release("embed", in_state(WorkloadState.SUCCEEDED))
    store.record_event(Event(at=NOW, workload="chat", text="endpoint up"))
    again = SqliteStateStore(path, clock=ticking(START))
    assert again.snapshot() == store.snapshot()
    assert again.admission("chat") == chat
    assert again.events() == store.events()
    assert len(again.events()) == 4


def test_values_are_stored_as_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking(START))
    admit(store, "chat", TWO_CARDS)
    admit(store, "embed", TWO_CARDS, recovery_after=timedelta(seconds=90.5))
    db = sqlite3.connect(path)
    try:
        (record,) = db.execute("SELECT record FROM workloads WHERE name = 'embed'").fetchone()
        (decision,) = db.execute(
            "SELECT decision FROM admissions WHERE workload = 'embed'"
        ).fetchone()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()
    workload = json.loads(record)["workload"]
    assert workload["recovery_after"] == 90.5
    assert workload["since"] == "2026-03-01T12:00:00.000250+02:00"
    assert (workload["state"], workload["kind"]) == ("admitted", "service")
    ranked = json.loads(decision)["placement"]["ranked"]
    assert [r["score"] for r in ranked] == ["1/2"]
    assert mode == "wal"


@frozen(kw_only=True)
class _Odd:
    where: Path
    share: Fraction
    gap: timedelta
    at: datetime
    state: WorkloadState | None


@pytest.mark.parametrize(
    "value",
    [
        _Odd(
            where=Path("/models/a b.gguf"),
            share=Fraction(-7, 3),
            gap=timedelta(days=2, microseconds=1),
            at=datetime(2026, 1, 1, tzinfo=UTC),
            state=WorkloadState.HELD,
        ),
        _Odd(
            where=Path("relative/x"),
            share=Fraction(0),
            gap=timedelta(0),
            at=datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(-timedelta(hours=5))),
            state=None,
        ),
    ],
)
def test_the_converter_round_trips_exactly(value: _Odd) -> None:
    text = json.dumps(_converter.unstructure(value))
    assert _converter.structure(json.loads(text), _Odd) == value


def test_a_file_that_is_not_a_database_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    path.write_bytes(b"this is not SQLite, just text " * 100)
    with pytest.raises(StateError) as caught:
        SqliteStateStore(path, clock=ticking())
    assert str(caught.value).startswith(f"{path}: cannot ")
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.Error)


def test_a_row_that_does_not_read_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking())
    admit(store, "chat")
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(
                "UPDATE workloads SET record = json_set(record, '$.workload.state', 'dancing')"
            )
    finally:
        db.close()
    with pytest.raises(StateError) as caught:
        store.snapshot()
    message = str(caught.value)
    assert message.startswith(f"{path}: the record of chat cannot be read (")
    assert "\n" not in message


def test_the_schema_itself_refuses_a_second_holder_for_a_card(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking())
    chat = admit(store, "chat")
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO workloads (name, record) VALUES ('sneaky', '{}')")
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            db.execute(
                "INSERT INTO reservations (workload, machine, gpu_uuid, bytes) "
                "VALUES ('sneaky', 'm1', ?, 1)",
                (chat.placement.gpu_uuid,),
            )
    finally:
        db.close()
