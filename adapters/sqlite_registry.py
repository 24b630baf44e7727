"""The artifact registry in SQLite: artifacts, alias histories, measured peaks and
qualification evidence (each run one row of Nodeau's record JSON, under its artifact).

Why it is so: docs/adr/decisions/adapters.md (sqlite_registry.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import cattrs

from nodeau.adapters.record_json import dumps, loads
from nodeau.domain.aliases import AliasBook, append_only_problem
from nodeau.domain.artifacts import Artifact, ArtifactFile, Origin, Sha256
from nodeau.domain.memory import MeasuredKey, MeasuredTable, Measurement
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence, record
from nodeau.ports.models import ModelError

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    id TEXT PRIMARY KEY, origin TEXT NOT NULL, source TEXT NOT NULL, files TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS aliases (
    alias TEXT NOT NULL, seq INTEGER NOT NULL, artifact_id TEXT NOT NULL REFERENCES artifacts(id),
    PRIMARY KEY (alias, seq)
);
CREATE TABLE IF NOT EXISTS measurements (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, artifact_id TEXT NOT NULL, gpu_model TEXT NOT NULL,
    config_key TEXT NOT NULL, peak_bytes INTEGER NOT NULL, note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS qualifications (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, artifact_id TEXT NOT NULL, evidence TEXT NOT NULL
);
"""

_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_unstructure_hook(Sha256, lambda s: s.hex)
_converter.register_structure_hook(Sha256, lambda v, _t: Sha256(hex=v))


class SqliteRegistry:
    """``ArtifactRegistry`` kept in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection; SQLite's failures in its use become one line naming the file."""
        try:
            db = sqlite3.connect(self._path, timeout=60, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA foreign_keys=ON")
                yield db
            finally:
                db.close()
        except sqlite3.Error as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise ModelError(
                f"{self._path}: cannot read the model registry ({detail}); the model files are"
                " untouched: move this file aside and import them again (nodeau models import)"
            ) from exc

    def book(self) -> AliasBook:
        with self._connect() as db:
            return _read_book(db)

    def update(self, change: Callable[[AliasBook], tuple[AliasBook, T]]) -> T:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                before = _read_book(db)
                after, result = change(before)
                _append(db, before, after)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

    def measurements(self) -> MeasuredTable:
        with self._connect() as db:
            rows = db.execute(
                "SELECT artifact_id, gpu_model, config_key, peak_bytes, note "
                "FROM measurements ORDER BY seq"
            ).fetchall()
        return MeasuredTable(
            measurements=tuple(
                Measurement(
                    key=MeasuredKey(artifact_id=a, gpu_model=g, config_key=k),
                    peak_bytes=p,
                    note=n,
                )
                for a, g, k, p, n in rows
            )
        )

    def record_measurement(self, measurement: Measurement) -> None:
        key = measurement.key
        with self._connect() as db:
            db.execute(
                "INSERT INTO measurements (artifact_id, gpu_model, config_key, peak_bytes, note) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    key.artifact_id,
                    key.gpu_model,
                    key.config_key,
                    measurement.peak_bytes,
                    measurement.note,
                ),
            )

    def evidence(self) -> EvidenceBook:
        with self._connect() as db:
            rows = db.execute("SELECT seq, evidence FROM qualifications ORDER BY seq").fetchall()
        book = EvidenceBook.empty()
        for seq, text in rows:
            book = record(book, loads(text, QualificationEvidence, f"qualification run {seq}"))
        return book

    def record_evidence(self, evidence: QualificationEvidence) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT INTO qualifications (artifact_id, evidence) VALUES (?, ?)",
                (evidence.artifact_id.hex, dumps(evidence, QualificationEvidence)),
            )


def _read_book(db: sqlite3.Connection) -> AliasBook:
    artifacts = {}
    for artifact_id, origin, source, files in db.execute(
        "SELECT id, origin, source, files FROM artifacts"
    ):
        artifact = Artifact.of_files(
            _converter.structure(json.loads(files), list[ArtifactFile]),
            origin=Origin(origin),
            source=source,
        )
        if artifact.id.hex != artifact_id:
            raise ValueError(
                f"registry row {artifact_id} holds files whose id is {artifact.id.hex}"
            )
        artifacts[artifact.id] = artifact
    histories: dict[str, list[Sha256]] = {}
    for alias, artifact_id in db.execute(
        "SELECT alias, artifact_id FROM aliases ORDER BY alias, seq"
    ):
        histories.setdefault(alias, []).append(Sha256(hex=artifact_id))
    return AliasBook(histories={a: tuple(ids) for a, ids in histories.items()}, artifacts=artifacts)


def _append(db: sqlite3.Connection, before: AliasBook, after: AliasBook) -> None:
    """Insert what ``after`` adds to ``before``; refuse anything that rewrites."""
    problem = append_only_problem(before, after)
    if problem is not None:
        raise ValueError(problem)
    for artifact_id, artifact in after.artifacts.items():
        if artifact_id not in before.artifacts:
            db.execute(
                "INSERT INTO artifacts (id, origin, source, files) VALUES (?, ?, ?, ?)",
                (
                    artifact_id.hex,
                    artifact.origin.value,
                    artifact.source,
                    json.dumps(_converter.unstructure(list(artifact.files))),
                ),
            )
    for alias, ids in after.histories.items():
        start = len(before.history(alias))
        for seq, artifact_id in enumerate(ids[start:], start=start):
            db.execute(
                "INSERT INTO aliases (alias, seq, artifact_id) VALUES (?, ?, ?)",
                (alias, seq, artifact_id.hex),
            )
