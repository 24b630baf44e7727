"""``nodeau environment --json`` carries the model server line as fields, through the
installed command: the line itself, the server's name and version, what it uses ("CPU
only", or CUDA with the devices it saw), its backends; and, with none, that none was found
and why (the same line a person reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fakes.server_answers import CUDA_ANSWER, stand_in
from tests.support.real.cli import Cli

CPU_BUILD = Path("~/.cache/nodeau/llama-server/0.3.36/cpu/bin/llama-server").expanduser()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")


def server_of(cli: Cli) -> dict[str, object]:
    reading = cli.json("environment")
    assert isinstance(reading, dict)
    server = reading["server"]
    assert isinstance(server, dict)
    return server


def printed_line(cli: Cli) -> str:
    done = cli("environment")
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("server   ")]
    return line.removeprefix("server   ")


def test_a_cpu_build_is_cpu_only_in_fields_and_in_words(cli: Cli) -> None:
    cli.env["NODEAU_LLAMA_SERVER"] = str(CPU_BUILD)
    server = server_of(cli)
    assert server["line"] == printed_line(cli)
    assert (server["found"], server["name"], server["uses"]) == (True, "llama-server", "CPU only")
    assert (server["cpu_only"], server["backends"]) == (True, [])
    assert server["line"] == f"llama-server {server['version']}: CPU only"
    assert (server["program"], server["reason"]) == (str(CPU_BUILD), "NODEAU_LLAMA_SERVER is set")


def test_a_cuda_build_says_cuda_and_its_devices(cli: Cli, tmp_path: Path) -> None:
    binary = stand_in(tmp_path / "llama-server", CUDA_ANSWER, counter=tmp_path / "calls")
    cli.env.update(NODEAU_LLAMA_SERVER=str(binary), XDG_CACHE_HOME=str(tmp_path / "cache"))
    server = server_of(cli)
    assert server["line"] == printed_line(cli)
    assert (server["version"], server["cpu_only"], server["backends"]) == (
        "9.9.9 (build 7, commit abc1234)",
        False,
        ["CUDA"],
    )
    assert server["uses"] == ("CUDA (CUDA0 NVIDIA H200, 140.4 GiB, CUDA1 NVIDIA H200, 140.4 GiB)")


def test_no_model_server_is_not_found_with_the_reason(cli: Cli, tmp_path: Path) -> None:
    cli.env["NODEAU_LLAMA_SERVER"] = str(tmp_path / "nothing-here")
    server = server_of(cli)
    assert server["line"] == printed_line(cli)
    assert "no model server there" in str(server["line"])
    assert (server["found"], server["name"], server["cpu_only"], server["program"]) == (
        False,
        None,
        None,
        None,
    )
