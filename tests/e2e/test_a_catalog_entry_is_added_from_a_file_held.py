"""``nodeau models catalog add`` for a GGUF held, then ``models pull`` of it, as a person runs them.

The entry's size and SHA-256 come from the file and it claims only what qualification proved
on those bytes (recorded as ``nodeau model qualify`` records it: tests/e2e/test_qualify_cli.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.domain.artifacts import Sha256
from nodeau.domain.qualification import ProbeOutcome
from tests.support.builders.evidence import qualified
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.publisher import LocalPublisher, local_publisher

REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def publisher() -> Iterator[LocalPublisher]:
    with local_publisher() as p:
        yield p


def add(cli: Cli, path: Path, name: str = "mine-q8", *more: str) -> CompletedProcess[str]:
    return cli(
        "models", "catalog", "add", str(path), "--name", name,
        "--repo", "someone/mine-GGUF", "--revision", REVISION, "--parameters", "1M", *more,
    )  # fmt: skip


def test_an_entry_claims_what_was_proved_and_is_pulled_from_its_publisher(
    tmp_path: Path, publisher: LocalPublisher
) -> None:
    home = tmp_path / "home"
    cli = Cli(home, NODEAU_PUBLISHER_URL=publisher.base_url)
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=31)
    data = path.read_bytes()
    sha = Sha256.of_bytes(data)

    refused = add(cli, path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "proved no task here" in refused.stderr

    SqliteRegistry(home / "registry.sqlite3").record_evidence(
        qualified(sha, "SIMULATED", ProbeOutcome.PASSED)
    )
    done = add(cli, path)
    assert done.returncode == 0, done.stderr
    assert f"sha256 {sha.hex}" in done.stdout
    assert "claims chat (proved by qualification here)" in done.stdout

    entries = cli.json("models", "catalog", "list")
    assert isinstance(entries, list)
    [mine] = [e for e in entries if e["entry"]["name"] == "mine-q8"]
    assert mine["tasks"] == ["chat"] and mine["capabilities"] == ["chat"]
    assert mine["entry"]["files"] == [
        {"path": "mine.gguf", "size_bytes": len(data), "sha256": sha.hex}
    ]
    assert any(e["entry"]["name"].startswith("smollm2") for e in entries)  # shipped ones stay
    kept = json.loads((home / "catalog.json").read_text())
    assert [m["name"] for m in kept["models"]] == ["mine-q8"]

    publisher.serve(f"/someone/mine-GGUF/resolve/{REVISION}/mine.gguf", data)
    pulled = cli("models", "pull", "mine-q8")
    assert pulled.returncode == 0, pulled.stderr
    assert "mine-q8 is verified on testbox" in pulled.stdout


def test_a_name_or_bytes_listed_already_and_a_moving_revision_are_refused(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    cli = Cli(home)
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=32)
    SqliteRegistry(home / "registry.sqlite3").record_evidence(
        qualified(Sha256.of_bytes(path.read_bytes()), "SIMULATED", ProbeOutcome.PASSED)
    )
    assert add(cli, path).returncode == 0
    again = add(cli, path, "another-name")
    assert again.returncode == 1
    assert "those bytes are in the catalog already, as mine-q8" in again.stderr
    other = write_tiny_llama(tmp_path / "other.gguf", seed=33)
    taken = add(cli, other, "smollm2-135m-instruct-q4_1")
    assert taken.returncode == 1
    assert "is in the catalog already" in taken.stderr
    moving = cli(
        "models", "catalog", "add", str(other), "--name", "x",
        "--repo", "someone/x", "--revision", "main",
    )  # fmt: skip
    assert moving.returncode == 1 and "40-hex commit id" in moving.stderr
    assert len(moving.stderr.strip().splitlines()) == 1


def test_a_malformed_file_is_one_line_and_adds_nothing(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model\n" * 10)
    done = add(cli, bad)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "home" / "catalog.json").exists()
