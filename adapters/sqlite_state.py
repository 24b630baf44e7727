"""The one-machine plane's state in SQLite: workloads, the reservation ledger, admissions, events.

Why it is so: docs/adr/decisions/adapters.md (sqlite_state.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import cattrs
from returns.result import Failure, Result, Success

from nodeau.adapters.record_json import converter, dumps
from nodeau.domain.recording import (
    Conflict,
    admitted_event,
    admitted_ledger,
    check_release,
    check_update,
    released_text,
)
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.ports.state import (
    Admission,
    Event,
    Snapshot,
    StateError,
    UnknownWorkload,
    WorkloadRecord,
)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS workloads (name TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (
    workload TEXT NOT NULL REFERENCES workloads(name), slot INTEGER NOT NULL DEFAULT 0,
    machine TEXT NOT NULL, gpu_uuid TEXT NOT NULL UNIQUE,
    bytes INTEGER NOT NULL CHECK (bytes > 0), PRIMARY KEY (workload, slot)
);
CREATE TABLE IF NOT EXISTS admissions (
    workload TEXT PRIMARY KEY REFERENCES workloads(name), decided_at TEXT NOT NULL,
    decision TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, workload TEXT NOT NULL,
    text TEXT NOT NULL
);
"""

# a home made before a workload could hold several cards keyed reservations by workload:
# its rows become the first card of each (one transaction, before anything else is read)
_ONE_CARD_TABLE = "workload TEXT PRIMARY KEY REFERENCES workloads(name)"
_SEVERAL_CARDS = """
ALTER TABLE reservations RENAME TO reservations_of_one_card;
CREATE TABLE reservations (
    workload TEXT NOT NULL REFERENCES workloads(name), slot INTEGER NOT NULL DEFAULT 0,
    machine TEXT NOT NULL, gpu_uuid TEXT NOT NULL UNIQUE,
    bytes INTEGER NOT NULL CHECK (bytes > 0), PRIMARY KEY (workload, slot)
);
INSERT INTO reservations (workload, slot, machine, gpu_uuid, bytes)
    SELECT workload, 0, machine, gpu_uuid, bytes FROM reservations_of_one_card ORDER BY rowid;
DROP TABLE reservations_of_one_card;
"""

BUSY_TIMEOUT_S = 60  # racing `nodeau run` processes wait their turn rather than fail


_converter = converter()  # the JSON form every store shares (record_json.py)


def _dumps(value: object, type_: Any) -> str:
    return dumps(value, type_)


class SqliteStateStore:
    """``StateStore`` kept in one SQLite file (WAL), shared by every process of the plane."""

    def __init__(self, path: Path, clock: Callable[[], datetime]) -> None:
        self._path = path
        self._clock = clock
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"{path}: cannot create its folder ({exc.strerror})") from exc
        with self._guard("create the tables"), self._connect() as db:
            db.executescript(_SCHEMA)
        with self._guard("let a workload hold several cards"), self._write() as db:
            row = db.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'reservations'"
            ).fetchone()
            if row is not None and _ONE_CARD_TABLE in row[0]:
                for statement in filter(str.strip, _SEVERAL_CARDS.split(";")):
                    db.execute(statement)

    def snapshot(self) -> Snapshot:
        with self._guard("read"), self._connect() as db:
            return self._snapshot(db)

    def admit(
        self, workload: str, decide: Callable[[Snapshot], Result[Admission, Refusal]]
    ) -> Result[Admission, Refusal]:
        with self._guard("record an admission"), self._write() as db:
            snapshot = self._snapshot(db)
            outcome = decide(snapshot)
            match outcome:
                case Failure():
                    db.execute("ROLLBACK")  # a refusal records nothing
                    return outcome
                case Success(Admission() as admission):
                    pass
            if admission.record.workload.name != workload:
                raise ValueError(
                    f"admit({workload!r}) decided about {admission.record.workload.name!r}"
                )
            if isinstance(conflict := admitted_ledger(snapshot, admission), Conflict):
                raise StateError(conflict.sentence)
            record = admission.record
            name = record.workload.name
            db.execute(
                "INSERT OR REPLACE INTO workloads (name, record) VALUES (?, ?)",
                (name, _dumps(record, WorkloadRecord)),
            )
            db.executemany(  # every card of a split, in this one transaction
                "INSERT INTO reservations (workload, slot, machine, gpu_uuid, bytes) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (name, slot, r.machine, r.gpu_uuid, r.bytes)
                    for slot, r in enumerate(admission.placement.reservations)
                ],
            )
            db.execute(
                "INSERT OR REPLACE INTO admissions (workload, decided_at, decision) "
                "VALUES (?, ?, ?)",
                (name, admission.decided_at.isoformat(), _dumps(admission, Admission)),
            )
            self._insert_event(
                db, Event(at=self._clock(), workload=name, text=admitted_event(admission))
            )
            return outcome

    def update(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        with self._guard(f"update {name}"), self._write() as db:
            before = self._record(db, name)
            after = change(before)
            check_update(before, after)
            self._store_record(db, after)
            return after

    def release(
        self, name: str, change: Callable[[WorkloadRecord], WorkloadRecord]
    ) -> WorkloadRecord:
        with self._guard(f"release {name}"), self._write() as db:
            before = self._record(db, name)
            after = change(before)
            check_release(before, after)
            self._store_record(db, after)
            freed = tuple(
                Reservation(workload=name, machine=machine, gpu_uuid=gpu_uuid, bytes=size)
                for machine, gpu_uuid, size in db.execute(
                    "SELECT machine, gpu_uuid, bytes FROM reservations WHERE workload = ? "
                    "ORDER BY slot",
                    (name,),
                )
            )
            if freed:
                db.execute("DELETE FROM reservations WHERE workload = ?", (name,))
                self._insert_event(
                    db, Event(at=self._clock(), workload=name, text=released_text(after, *freed))
                )
            return after

    def admission(self, name: str) -> Admission:
        with self._guard(f"read the admission of {name}"), self._connect() as db:
            row = db.execute(
                "SELECT decision FROM admissions WHERE workload = ?", (name,)
            ).fetchone()
        if row is None:
            raise UnknownWorkload(f"no workload called {name} in {self._path}")
        return self._load(row[0], Admission, f"the admission of {name}")

    def record_event(self, event: Event) -> None:
        with self._guard("record an event"), self._connect() as db:
            self._insert_event(db, event)

    def events(self, name: str | None = None) -> tuple[Event, ...]:
        with self._guard("read events"), self._connect() as db:
            if name is None:
                rows = db.execute("SELECT at, workload, text FROM events ORDER BY seq").fetchall()
            else:
                rows = db.execute(
                    "SELECT at, workload, text FROM events WHERE workload = ? ORDER BY seq",
                    (name,),
                ).fetchall()
        return tuple(
            self._structure({"at": at, "workload": w, "text": t}, Event, "an event")
            for at, w, t in rows
        )

    # -- plumbing

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """SQLite's failures become one line naming the database file."""
        try:
            yield
        except sqlite3.Error as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise StateError(f"{self._path}: cannot {what} ({detail})") from exc

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before anything is read; committed unless it raised
        or was already rolled back."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if db.in_transaction:
                db.execute("COMMIT")

    def _snapshot(self, db: sqlite3.Connection) -> Snapshot:
        records = tuple(
            self._load(text, WorkloadRecord, f"the record of {name}")
            for name, text in db.execute("SELECT name, record FROM workloads ORDER BY rowid")
        )
        reservations = tuple(
            Reservation(workload=w, machine=m, gpu_uuid=g, bytes=b)
            for w, m, g, b in db.execute(
                "SELECT workload, machine, gpu_uuid, bytes FROM reservations ORDER BY rowid, slot"
            )
        )
        return Snapshot(ledger=Ledger(reservations=reservations), workloads=records)

    def _record(self, db: sqlite3.Connection, name: str) -> WorkloadRecord:
        row = db.execute("SELECT record FROM workloads WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise UnknownWorkload(f"no workload called {name} in {self._path}")
        return self._load(row[0], WorkloadRecord, f"the record of {name}")

    def _store_record(self, db: sqlite3.Connection, record: WorkloadRecord) -> None:
        db.execute(
            "UPDATE workloads SET record = ? WHERE name = ?",
            (_dumps(record, WorkloadRecord), record.workload.name),
        )

    def _insert_event(self, db: sqlite3.Connection, event: Event) -> None:
        db.execute(
            "INSERT INTO events (at, workload, text) VALUES (?, ?, ?)",
            (event.at.isoformat(), event.workload, event.text),
        )

    def _load(self, text: str, type_: type[T], what: str) -> T:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise self._unreadable(what, f"not JSON: {exc}") from exc
        return self._structure(raw, type_, what)

    def _structure(self, raw: object, type_: type[T], what: str) -> T:
        """A stored value back as a domain value; a row that does not read is a StateError."""
        try:
            return _converter.structure(raw, type_)
        except cattrs.BaseValidationError as exc:
            raise self._unreadable(what, "; ".join(cattrs.transform_error(exc))) from exc
        except (ValueError, TypeError, AttributeError) as exc:
            # AttributeError: cattrs' generated code reads a JSON array or string as a mapping
            raise self._unreadable(what, str(exc)) from exc

    def _unreadable(self, what: str, detail: str) -> StateError:
        return StateError(f"{self._path}: {what} cannot be read ({' '.join(detail.split())})")
