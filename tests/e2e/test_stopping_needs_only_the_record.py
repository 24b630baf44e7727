"""``nodeau stop NAME --workload`` needs only the workload's record, no model server found.

A model is served by the real llama-server; then, in a shell where no model server can be
found (no setting, nothing on PATH, no install in the cache: a user who removed it, or
runs the wheel's ``nodeau``), stopping still ends that process and frees its card.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psutil

from nodeau.adapters.sqlite_state import SqliteStateStore
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def test_stop_workload_ends_the_server_and_frees_the_card_with_no_model_server_found(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=4)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    started = cli("run", "tiny", "--unproved", "--context", "256")
    assert started.returncode == 0, started.stderr
    [row] = json.loads(cli("ps", "--json").stdout)
    record = SqliteStateStore(tmp_path / "home" / "state.sqlite3", lambda: NOW).snapshot()
    server = record.named("tiny").server  # type: ignore[union-attr]
    assert server is not None and psutil.pid_exists(server.pid), "the model server runs"

    cli.env.pop("NODEAU_LLAMA_SERVER", None)
    cli.env.update(
        PATH="/usr/bin:/bin",
        XDG_CACHE_HOME=str(tmp_path / "no-cache"),
        NODEAU_LLAMA_CACHE=str(tmp_path / "no-cache" / "llama-server"),
    )
    assert "no model server found" in cli("environment").stdout
    stopped = cli("stop", "tiny", "--workload")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"tiny: endpoint and model stopped; {row['gpu']} is free"
    assert json.loads(cli("ps", "--json").stdout) == []
    assert not psutil.pid_exists(server.pid) or psutil.Process(server.pid).status() == "zombie"
