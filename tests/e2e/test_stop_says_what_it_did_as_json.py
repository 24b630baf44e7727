"""``nodeau stop NAME --json`` through the installed command, on a real model server: the
keys its help documents, what was asked and what ``ps`` says of the workload afterwards
(the endpoint gone and the card still held; then, with --workload, the card free)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

KEYS = ["name", "workload", "kind", "gpu", "cards", "holds_gpu", "state", "endpoint", "sentence"]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")


def test_stop_as_json_says_what_was_asked_and_what_ps_says_now(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    started = cli("run", "tiny", "--unproved", "--context", "512")
    try:
        assert started.returncode == 0, started.stderr
        [row] = cli.json("ps")
        assert isinstance(row, dict)

        endpoint = cli.json("stop", "tiny")
        assert isinstance(endpoint, dict)
        assert list(endpoint) == KEYS
        assert endpoint["name"] == "tiny" and endpoint["workload"] is False
        assert (endpoint["kind"], endpoint["gpu"]) == ("service", row["gpu"])
        assert endpoint["cards"] == row["cards"] == [row["gpu"]]
        assert (endpoint["holds_gpu"], endpoint["endpoint"]) == (True, None)
        assert endpoint["state"] == json.loads(cli("ps", "--json").stdout)[0]["state"]
        assert endpoint["sentence"].startswith("tiny: endpoint stopped; the model stays loaded")

        freed = cli.json("stop", "tiny", "--workload")
        assert isinstance(freed, dict)
        assert freed["workload"] is True and freed["gpu"] == row["gpu"]
        assert (freed["holds_gpu"], freed["state"], freed["endpoint"]) == (False, None, None)
        assert freed["sentence"] == f"tiny: endpoint and model stopped; {row['gpu']} is free"
        assert json.loads(cli("ps", "--json").stdout) == []
    finally:
        cli("stop", "tiny", "--workload")


def test_stopping_an_unknown_name_as_json_is_one_line_and_exit_1(cli: Cli) -> None:
    done = cli("stop", "nosuch", "--json")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("nodeau: no workload called 'nosuch'")
    assert done.stderr.count("\n") == 1
