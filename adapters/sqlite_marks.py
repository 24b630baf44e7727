"""The one-machine plane's scheduling marks in SQLite, beside its state.

One row of JSON in table ``marks`` of the state database, replaced in one
``BEGIN IMMEDIATE`` transaction, so two commands marking at once never lose
one another's change. No database yet: no marks, and reading creates nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from nodeau.domain.marking import Marks
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.ports.state import StateError

_SCHEMA = "CREATE TABLE IF NOT EXISTS marks (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_KEY = "scheduling"
BUSY_TIMEOUT_S = 60


def marks_json(marks: Marks) -> str:
    return json.dumps(
        {
            "drained": sorted(marks.drained),
            "fleet_policy": marks.settings.fleet_policy.value,
            "overrides": [[m, p.value] for m, p in marks.settings.overrides],
            "upgrading": sorted(marks.upgrading),
        },
        sort_keys=True,
    )


def marks_from_json(text: str) -> Marks:
    raw = json.loads(text)
    return Marks(
        drained=frozenset(str(m) for m in raw["drained"]),
        settings=SchedulingSettings(
            fleet_policy=Policy(raw["fleet_policy"]),
            overrides=tuple((str(m), Policy(p)) for m, p in raw["overrides"]),
        ),
        # marks written before the upgrading mark existed have none
        upgrading=frozenset(str(m) for m in raw.get("upgrading", ())),
    )


class SqliteMarks:
    """``SchedulingMarks`` in the one-machine plane's state database."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def read(self) -> Marks:
        if not self._path.exists():
            return Marks()
        with self._guard("read the scheduling marks"), self._connect() as db:
            db.execute(_SCHEMA)
            row = db.execute("SELECT value FROM marks WHERE key = ?", (_KEY,)).fetchone()
        return Marks() if row is None else self._parse(row[0])

    def change(self, change: Callable[[Marks], Marks]) -> Marks:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._guard("write the scheduling marks"), self._connect() as db:
            db.execute(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT value FROM marks WHERE key = ?", (_KEY,)).fetchone()
            after = change(Marks() if row is None else self._parse(row[0]))
            db.execute(
                "INSERT OR REPLACE INTO marks (key, value) VALUES (?, ?)", (_KEY, marks_json(after))
            )
            db.execute("COMMIT")
        return after

    def _parse(self, text: str) -> Marks:
        try:
            return marks_from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            raise StateError(
                f"{self._path}: the scheduling marks cannot be read ({exc}); "
                "nodeau scheduling undrain / policy writes them anew"
            ) from exc

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        with closing(db):
            yield db

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StateError(f"{self._path}: cannot {what}: {exc}") from exc
