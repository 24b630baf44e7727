"""The model commands as a user runs them: the installed ``nodeau`` against real files and HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeau.adapters.catalog_file import catalog_json
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.tasks import Task
from tests.support.builders.tiny_gguf import tiny_llama_bytes, write_tiny_llama
from tests.support.real.cli import Cli as BaseCli
from tests.support.real.publisher import LocalPublisher, local_publisher

REVISION = "0123456789abcdef0123456789abcdef01234567"


class Cli(BaseCli):
    """Runs ``nodeau`` with its own data folder, catalog and publisher."""

    def __init__(self, home: Path, catalog: Path, publisher_url: str) -> None:
        super().__init__(
            home, NODEAU_CATALOG=str(catalog), NODEAU_PUBLISHER_URL=publisher_url, timeout_s=120
        )


def entry_for(name: str, data: bytes, filename: str = "model.gguf") -> CatalogEntry:
    file = ArtifactFile(path=filename, size_bytes=len(data), sha256=Sha256.of_bytes(data))
    return CatalogEntry(
        entry=CuratedEntry(
            name=name, publisher="tests", repo=f"tests/{name}", revision=REVISION, files=(file,)
        ),
        summary=ArchitectureSummary(
            architecture="llama", parameters="tiny", context_length=256, quantisation="F32"
        ),
        tasks=(Task.CHAT,),
    )


def served_path(entry: CatalogEntry) -> str:
    return f"/{entry.entry.repo}/resolve/{REVISION}/{entry.entry.files[0].path}"


MODEL = tiny_llama_bytes(seed=1)
OTHER = tiny_llama_bytes(seed=2)
CATALOG = Catalog(entries=(entry_for("tiny-chat", MODEL), entry_for("tiny-other", OTHER)))


@pytest.fixture
def publisher() -> Iterator[LocalPublisher]:
    with local_publisher() as p:
        yield p


@pytest.fixture
def cli(tmp_path: Path, publisher: LocalPublisher) -> Cli:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_json(CATALOG))
    return Cli(tmp_path / "home", catalog, publisher.base_url)


def status_rows(cli: Cli) -> list[dict[str, object]]:
    rows = cli.json("model", "status")
    assert isinstance(rows, list)
    return rows


def test_import_stores_a_verified_copy_and_names_it(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=7)
    before = (path.stat().st_ino, path.read_bytes())
    done = cli("models", "import", str(path))
    assert done.returncode == 0, done.stderr
    sha = Sha256.of_bytes(path.read_bytes()).hex
    assert f"artifact {sha}" in done.stdout
    assert "verified" in done.stdout
    assert (path.stat().st_ino, path.read_bytes()) == before  # never moved or changed
    [row] = status_rows(cli)
    assert (row["names"], row["sha256"], row["downloaded"]) == (["mine"], sha, "yes")
    assert str(row["verified"]).startswith("yes")
    assert row["machine"] == "testbox"


def test_different_bytes_under_a_used_alias_make_a_new_artifact(cli: Cli, tmp_path: Path) -> None:
    first = write_tiny_llama(tmp_path / "a.gguf", seed=1)
    second = write_tiny_llama(tmp_path / "b.gguf", seed=2)
    old = Sha256.of_bytes(first.read_bytes())
    new = Sha256.of_bytes(second.read_bytes())
    assert cli("models", "import", str(first), "--alias", "mine").returncode == 0
    done = cli("models", "import", str(second), "--alias", "mine")
    assert done.returncode == 0, done.stderr
    assert old.short in done.stdout and new.short in done.stdout
    assert "new artifact" in done.stdout.lower()
    # the alias names the new bytes; the old artifact is untouched and still reachable by id
    info_new = cli("model", "info", "mine")
    info_old = cli("model", "info", old.hex[:12])
    assert f"artifact     {new.hex}" in info_new.stdout
    assert f"artifact     {old.hex}" in info_old.stdout


def test_no_register_counts_the_copy_without_naming_it(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "copy.gguf", seed=3)
    done = cli("models", "import", str(path), "--no-register")
    assert done.returncode == 0, done.stderr
    [row] = status_rows(cli)
    assert row["names"] == []
    assert str(row["verified"]).startswith("yes")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "is empty"),
        (b"GGUF", "truncated"),
        (b"not a model at all, just text\n" * 10, "bad magic"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line_and_nothing_is_kept(
    cli: Cli, tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    done = cli("models", "import", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"nodeau: {path}")
    assert problem in line
    assert status_rows(cli) == []


def test_a_changed_file_drops_out_of_verified_and_verify_catches_it(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=4)
    assert cli("models", "import", str(path)).returncode == 0
    sha = Sha256.of_bytes(path.read_bytes()).hex
    assert cli("model", "verify", "mine").returncode == 0
    # the cache holds a hard link to the user's file: change the bytes in place
    with path.open("r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02\x03")
    [row] = status_rows(cli)
    assert row["verified"] == "no"
    done = cli("model", "verify", "mine")
    assert done.returncode == 1
    assert done.stdout.strip() == f"{sha[:12]}: mismatch"
    [row] = status_rows(cli)
    assert (row["verified"], row["state"]) == ("NO: wrong bytes", "mismatch")


def test_pull_fetches_and_verifies_a_catalog_model(cli: Cli, publisher: LocalPublisher) -> None:
    entry = CATALOG.entries[0]
    publisher.serve(served_path(entry), MODEL)
    done = cli("models", "pull", "tiny-chat")
    assert done.returncode == 0, done.stderr
    assert "tiny-chat is verified on testbox" in done.stdout
    [row] = status_rows(cli)
    assert (row["names"], row["downloaded"]) == (["tiny-chat"], "yes")
    assert str(row["verified"]).startswith("yes")
    again = cli("models", "pull", "tiny-chat")
    assert "already held and verified here" in again.stdout
    assert len(publisher.ranges(served_path(entry))) == 1  # nothing fetched twice


def test_wrong_bytes_from_the_publisher_are_discarded_naming_both_hashes(
    cli: Cli, publisher: LocalPublisher
) -> None:
    entry = CATALOG.entries[0]
    publisher.serve(served_path(entry), MODEL, wrong_bytes=True)
    done = cli("models", "pull", "tiny-chat")
    assert done.returncode == 1
    wrong = Sha256.of_bytes(bytes(b ^ 0xFF for b in MODEL)).hex
    assert Sha256.of_bytes(MODEL).hex in done.stderr and wrong in done.stderr
    assert "Traceback" not in done.stderr
    assert all(not str(r["verified"]).startswith("yes") for r in status_rows(cli))


def test_an_interrupted_pull_resumes_with_a_range_request(
    cli: Cli, publisher: LocalPublisher
) -> None:
    entry = CATALOG.entries[0]
    path = served_path(entry)
    publisher.serve(path, MODEL, cut_after=len(MODEL) // 3)
    first = cli("models", "pull", "tiny-chat")
    assert first.returncode == 1
    [row] = status_rows(cli)
    assert str(row["downloaded"]).startswith("partial")
    assert row["verified"] == "no"
    publisher.serve(path, MODEL)
    second = cli("models", "pull", "tiny-chat")
    assert second.returncode == 0, second.stderr
    assert publisher.ranges(path)[-1] == f"bytes={len(MODEL) // 3}-"
    [row] = status_rows(cli)
    assert str(row["verified"]).startswith("yes")


def test_model_info_labels_predictions_estimated_and_lists_no_measurements(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=5)
    assert cli("models", "import", str(path)).returncode == 0
    done = cli("model", "info", "mine")
    assert done.returncode == 0, done.stderr
    assert "llama: 2 layers, embedding 64, 4 heads, 4 KV heads" in done.stdout
    assert "context     256:" in done.stdout and "(estimated)" in done.stdout
    assert "measured configurations: none" in done.stdout
    info = cli.json("model", "info", "mine")
    assert isinstance(info, dict)
    assert info["measured"] == []
    assert {e["prediction"]["source"] for e in info["estimates"]} == {"estimated"}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("model", "verify", "no-such-model"), "no alias, catalog model or artifact id"),
        (("models", "pull", "no-such-model"), "no model called 'no-such-model'"),
        (("models", "import", "/no/such/file.gguf"), "/no/such/file.gguf"),
        (("models", "import", "x.gguf", "--alias", "has space"), "alias"),
    ],
)
def test_bad_requests_exit_non_zero_with_one_line(
    cli: Cli, args: tuple[str, ...], words: str
) -> None:
    done = cli(*args)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert words in line


def test_a_bad_argument_is_a_usage_error_without_traceback(cli: Cli) -> None:
    done = cli("models", "import")
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr
