"""The one-machine state store (SQLite) on a file of the test's, and raw SQL on that file.

``admitted`` gives a store at ``path`` in which "chat" is admitted; ``sql`` runs one
statement on the file behind the store's back, to damage what it reads.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from nodeau.adapters.sqlite_state import SqliteStateStore
from tests.support.builders.admissions import decider, fleet_of
from tests.support.clock import ticking

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def store_at(path: Path) -> SqliteStateStore:
    return SqliteStateStore(path, clock=ticking(NOW))


def admitted(path: Path) -> SqliteStateStore:
    store = store_at(path)
    store.admit("chat", decider("chat", fleet_of(1), NOW)).unwrap()
    return store


def sql(path: Path, statement: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(statement)
    finally:
        db.close()
