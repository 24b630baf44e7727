"""``nodeau models list`` and ``nodeau models rm`` as a user runs them, either spelling.

``rm`` keeps a copy a workload relies on, the user's own linked file and the registry's names;
``run ./file.gguf`` says to import first; a large import shows its progress on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodeau.apps.cli.models import LARGE_IMPORT_BYTES
from nodeau.domain.artifacts import Sha256
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")


def listed(cli: Cli, group: str = "models") -> list[dict[str, object]]:
    rows = cli.json(group, "list")
    assert isinstance(rows, list)
    return rows


def test_list_shows_each_copy_with_its_path_under_either_spelling(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=11)
    assert cli("models", "import", str(path), "--alias", "mine").returncode == 0
    [row] = listed(cli)
    assert row["names"] == ["mine"] and str(row["verified"]).startswith("yes")
    assert Path(str(row["path"])).read_bytes() == path.read_bytes()
    assert listed(cli, "model") == [row]
    shown = cli("models", "list")
    assert shown.returncode == 0 and "mine" in shown.stdout and str(row["path"]) in shown.stdout


def test_rm_deletes_the_copy_keeps_the_users_file_and_the_name(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=12)
    data = path.read_bytes()
    assert cli("models", "import", str(path), "--alias", "mine").returncode == 0
    done = cli("model", "rm", "mine")
    assert done.returncode == 0, done.stderr
    assert "mine: deleted mine.gguf" in done.stdout and "freed" in done.stdout
    assert listed(cli) == [] and cli.json("model", "status") == []
    assert path.read_bytes() == data  # the user's file, hard-linked into the cache, stays
    again = cli("models", "rm", "mine")
    assert again.returncode == 0 and "holds no copy of it; nothing deleted" in again.stdout
    # the name stays known: importing the same bytes makes it whole again
    assert cli("models", "import", str(path), "--no-register").returncode == 0
    [row] = listed(cli)
    assert row["names"] == ["mine"] and row["sha256"] == Sha256.of_bytes(data).hex


def test_rm_of_an_unknown_model_is_one_line_with_close_names(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=13)
    assert cli("models", "import", str(path), "--alias", "mine").returncode == 0
    done = cli("models", "rm", "mien")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "mine" in done.stderr


@pytest.mark.slow
def test_rm_refuses_while_a_workload_serves_it_and_deletes_once_it_stops(
    cli: Cli, tmp_path: Path
) -> None:
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=14)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    started = cli("run", "tiny", "--unproved", "--context", "256")
    assert started.returncode == 0, started.stderr
    try:
        refused = cli("models", "rm", "tiny", "--json")
        assert refused.returncode == 1
        said = json.loads(refused.stdout)
        assert [(r["kind"], r["name"]) for r in said["reliances"]] == [("service", "tiny")]
        assert "nothing deleted" in refused.stderr
        assert "`nodeau stop tiny --workload` frees it" in refused.stderr
        assert len(listed(cli)) == 1  # nothing deleted
    finally:
        assert cli("stop", "tiny", "--workload").returncode == 0
    done = cli("models", "rm", "tiny", "--json")
    assert done.returncode == 0, done.stderr
    assert [f["path"] for f in json.loads(done.stdout)["removal"]["delete"]] == ["tiny.gguf"]
    assert listed(cli) == []


def test_run_of_a_file_says_to_import_it_first(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "mine.gguf", seed=15)
    done = cli("run", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"`nodeau models import {path} --alias NAME`, then `nodeau run NAME`" in done.stderr
    assert cli.json("ps") == []


@pytest.mark.slow
def test_a_large_import_shows_its_progress_and_a_small_one_does_not(
    cli: Cli, tmp_path: Path
) -> None:
    small = write_tiny_llama(tmp_path / "small.gguf", seed=16)
    quiet = cli("models", "import", str(small))
    assert quiet.returncode == 0 and quiet.stderr == ""
    # about 180 MiB of f32 weights: past the size a progress display is shown for
    large = write_tiny_llama(tmp_path / "large.gguf", n_embd=1024, n_ff=6144, n_head=8, seed=17)
    assert large.stat().st_size >= LARGE_IMPORT_BYTES
    shown = cli("models", "import", str(large))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stderr.splitlines()
    assert lines[0] == "hashing large.gguf ..."
    assert lines[-1].startswith("hashing large.gguf: ") and " of " in lines[-1]
