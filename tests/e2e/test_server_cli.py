"""``nodeau server install|list`` and the server line of ``nodeau environment``, end to end.

The cached CPU build is found and reused; a CUDA build's answer is a stand-in binary (no card
here); with no model server, every command that needs one names ``nodeau server install``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.server_answers import CUDA_ANSWER, stand_in
from tests.support.real.cli import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")


def test_install_reuses_the_finished_cpu_build(cli: Cli) -> None:
    built = cli.json("server", "install", "--cpu")
    assert isinstance(built, dict)
    assert (built["flavour"], built["backend"], built["backends"], built["reused"]) == (
        "cpu",
        "cpu",
        [],
        True,
    )
    assert Path(built["binary"]).is_file()
    assert built["version"].startswith("0.5.0-dev") and built["llama_cpp_commit"] == "0c1e570"
    said = cli("server", "install", "--cpu")
    assert said.returncode == 0, said.stderr
    assert said.stdout.startswith("already built for the CPU (built ")
    assert "  backends     CPU only" in said.stdout
    assert "nodeau server install: the CPU (asked with --cpu)" in said.stderr
    listed = cli("server", "list")
    assert listed.returncode == 0 and built["binary"] in listed.stdout
    assert "nodeau run starts: llama-server " in listed.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--cpu", "--cuda"), "nodeau: --cpu builds for the CPU alone"),
        (("--cuda",), "nodeau: --cuda: no NVIDIA card here to read a compute capability from"),
        (("--cuda-arch", "sm_90"), "nodeau: --cuda-arch 'sm_90': name compute capabilities"),
        (("--jobs", "0"), "nodeau: --jobs 0: give a positive number"),
    ],
)
def test_install_options_that_cannot_be_met_build_nothing(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    cli.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = cli("server", "install", *args)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(words)
    assert not (tmp_path / "cache").exists()


def test_environment_says_what_a_cuda_build_on_a_card_can_use(cli: Cli, tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "llama-server", CUDA_ANSWER, counter=tmp_path / "calls")
    cli.env.update(NODEAU_LLAMA_SERVER=str(binary), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = cli("environment")
    assert done.returncode == 0, done.stderr
    assert (
        "server   llama-server 9.9.9 (build 7, commit abc1234): CUDA (CUDA0 NVIDIA H200, "
        "140.4 GiB, CUDA1 NVIDIA H200, 140.4 GiB)"
    ) in done.stdout
    assert f"         {binary}: NODEAU_LLAMA_SERVER is set" in done.stdout
    reading = cli.json("environment")
    assert isinstance(reading, dict)
    assert reading["server"]["abilities"]["backends"] == ["CUDA"]
    assert [d["name"] for d in reading["server"]["abilities"]["devices"]] == ["CUDA0", "CUDA1"]
    # simulated cards: the server is shown none of them, as it would run
    assert (tmp_path / "calls").read_text().split("\n")[0] == "--version "


def test_with_no_model_server_run_names_the_install_and_records_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    cli.env.pop("NODEAU_LLAMA_SERVER", None)
    cli.env.update(
        PATH="/usr/bin:/bin",
        XDG_CACHE_HOME=str(tmp_path / "empty-cache"),
        NODEAU_LLAMA_CACHE=str(tmp_path / "empty-cache" / "llama-server"),
    )
    env = cli("environment")
    assert env.returncode == 0
    # (where llama-cpp-python is installed without a library, it says that first)
    assert "no model server found: run `nodeau server install`" in env.stdout
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    run = cli("run", "tiny", "--unproved")
    assert run.returncode == 1
    assert run.stderr.startswith("nodeau: ")
    assert "no model server found: run `nodeau server install`" in run.stderr
    assert json.loads(cli("ps", "--json").stdout) == []
