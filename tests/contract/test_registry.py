"""The artifact registry contract, run against SQLite and the in-memory fake alike."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeau.adapters.sqlite_registry import SqliteRegistry as Sqlite
from nodeau.domain.aliases import AliasBook, ImportKind, import_under_alias
from nodeau.domain.artifacts import Artifact, ArtifactFile, Sha256
from nodeau.domain.memory import MeasuredKey, Measurement
from nodeau.domain.qualification import ProbeOutcome
from nodeau.ports.registry import ArtifactRegistry
from tests.support.builders.evidence import qualified
from tests.support.fakes.fake_registry import FakeRegistry


def artifact(seed: bytes, name: str = "model.gguf") -> Artifact:
    return Artifact.imported(
        [ArtifactFile(path=name, size_bytes=len(seed), sha256=Sha256.of_bytes(seed))]
    )


@pytest.fixture(params=["sqlite", "fake"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactRegistry]:
    if request.param == "sqlite":
        yield Sqlite(tmp_path / "registry.sqlite3")
    else:
        yield FakeRegistry()


def test_a_new_registry_is_empty(registry: ArtifactRegistry) -> None:
    assert registry.book() == AliasBook.empty()
    assert registry.measurements().measurements == ()


def test_imports_are_kept_with_their_alias_history(registry: ArtifactRegistry) -> None:
    a, b = artifact(b"one"), artifact(b"two")
    first = registry.update(lambda book: import_under_alias(book, "qwen", a))
    second = registry.update(lambda book: import_under_alias(book, "qwen", b))
    assert (first.kind, second.kind) == (
        ImportKind.NEW_ALIAS,
        ImportKind.NEW_ARTIFACT_UNDER_USED_ALIAS,
    )
    book = registry.book()
    assert book.history("qwen") == (a.id, b.id)
    assert book.resolve("qwen") == b.id
    assert book.artifact(a.id) == a  # the old artifact is untouched and reachable


def test_a_rewrite_is_refused_and_nothing_is_kept(registry: ArtifactRegistry) -> None:
    a, b = artifact(b"one"), artifact(b"two")
    registry.update(lambda book: import_under_alias(book, "qwen", a))

    def repoint(book: AliasBook) -> tuple[AliasBook, None]:
        return AliasBook(histories={"qwen": (b.id,)}, artifacts={**book.artifacts, b.id: b}), None

    with pytest.raises(ValueError, match="alias qwen's history would be rewritten"):
        registry.update(repoint)
    assert registry.book().history("qwen") == (a.id,)
    assert registry.book().artifact(b.id) is None

    def forget(_book: AliasBook) -> tuple[AliasBook, None]:
        return AliasBook.empty(), None

    with pytest.raises(ValueError, match=f"artifact {a.id.hex} would be changed or removed"):
        registry.update(forget)


def test_measurements_keep_order_and_newest_wins(registry: ArtifactRegistry) -> None:
    key = MeasuredKey(artifact_id="a" * 64, gpu_model="NVIDIA H200", config_key="k")
    registry.record_measurement(Measurement(key=key, peak_bytes=10, note="first"))
    registry.record_measurement(Measurement(key=key, peak_bytes=12, note="second"))
    table = registry.measurements()
    assert [m.peak_bytes for m in table.measurements] == [10, 12]
    found = table.lookup(key)
    assert found is not None
    assert (found.peak_bytes, found.note) == (12, "second")


def test_evidence_is_kept_per_artifact_every_run_newest_last(registry: ArtifactRegistry) -> None:
    a, b = artifact(b"one"), artifact(b"two")
    assert registry.evidence().for_artifact(a.id) is None
    first = qualified(a.id, "simulated", ProbeOutcome.FAILED)
    second = qualified(a.id, "NVIDIA H200", ProbeOutcome.PASSED)
    other = qualified(b.id, "simulated", ProbeOutcome.PASSED)
    for run in (first, other, second):
        registry.record_evidence(run)
    book = registry.evidence()
    assert book.history(a.id) == (first, second)
    assert book.for_artifact(b.id) == other


def test_sqlite_keeps_everything_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "registry.sqlite3"
    a = artifact(b"one")
    Sqlite(path).update(lambda book: import_under_alias(book, "qwen", a))
    again = Sqlite(path)
    assert again.book().resolve("qwen") == a.id
    assert again.book().artifact(a.id) == a
    run = qualified(a.id, "simulated", ProbeOutcome.PASSED)
    again.record_evidence(run)
    assert Sqlite(path).evidence().history(a.id) == (run,)


def test_processes_racing_to_import_are_serialised(tmp_path: Path) -> None:
    path = tmp_path / "registry.sqlite3"
    Sqlite(path)
    program = (
        "import sys\n"
        "from nodeau.adapters.sqlite_registry import SqliteRegistry\n"
        "from nodeau.domain.aliases import import_under_alias\n"
        "from nodeau.domain.artifacts import Artifact, ArtifactFile, Sha256\n"
        "data = sys.argv[2].encode()\n"
        "a = Artifact.imported([ArtifactFile(path='m.gguf', size_bytes=len(data), "
        "sha256=Sha256.of_bytes(data))])\n"
        "r = SqliteRegistry(__import__('pathlib').Path(sys.argv[1]))\n"
        "for _ in range(5):\n"
        "    r.update(lambda book: import_under_alias(book, 'shared', a))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", program, str(path), f"bytes-{i}"]) for i in range(6)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    book = Sqlite(path).book()
    history = book.history("shared")
    # every process's artifact is recorded, and the history only ever appended
    assert len(book.artifacts) == 6
    assert set(history) == set(book.artifacts)
    assert all(history[i] != history[i + 1] for i in range(len(history) - 1))
