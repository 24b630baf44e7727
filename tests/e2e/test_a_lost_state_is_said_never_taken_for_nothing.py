"""A state file lost or emptied while model servers run is said, never taken as "nothing runs".

With ``state.sqlite3`` deleted or emptied under a real llama-server: ``ps`` shows the unnamed
server, a new workload is refused, ``stop NAME --workload`` ends it; a damaged registry is one line.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def lose(state: Path, how: str) -> None:
    for path in (state, state.with_name(state.name + "-wal"), state.with_name(state.name + "-shm")):
        if how == "deleted" or path != state:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(b"")


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_lost_state_shows_the_server_refuses_admission_and_stop_ends_it(
    tmp_path: Path, how: str
) -> None:
    home = tmp_path / "home"
    cli = Cli(home, NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=6)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    started = cli("run", "tiny", "--unproved", "--context", "256")
    assert started.returncode == 0, started.stderr
    server = SqliteStateStore(home / "state.sqlite3", lambda: NOW).snapshot().named("tiny")
    assert server is not None and server.server is not None
    pid = server.server.pid
    try:
        lose(home / "state.sqlite3", how)

        [row] = json.loads(cli("ps", "--json").stdout)
        assert (row["name"], row["state"]) == ("tiny", "unknown")
        assert f"pid {pid}" in row["sentence"] and "nodeau stop tiny --workload" in row["sentence"]

        refused = cli("run", "tiny", "--unproved", "--name", "other", "--context", "256")
        assert refused.returncode != 0
        assert f"tiny (pid {pid})" in refused.stderr and "nothing is admitted" in refused.stderr
        assert not gone(pid)
    finally:
        stopped = cli("stop", "tiny", "--workload")
    assert stopped.returncode == 0, stopped.stderr
    assert f"its model server (pid {pid}) is stopped" in stopped.stdout
    assert gone(pid)
    assert json.loads(cli("ps", "--json").stdout) == []


def test_a_damaged_registry_is_one_line_from_every_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli = Cli(home, NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=6)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    (home / "registry.sqlite3").write_bytes(b"not a database " * 512)
    for args in (
        ("model", "status"),
        ("model", "info", "tiny"),
        ("run", "tiny", "--unproved"),
        ("models", "import", str(model), "--alias", "again"),
    ):
        done = cli(*args)
        assert done.returncode == 1, args
        [line] = done.stderr.strip().splitlines()
        assert "registry.sqlite3: cannot read the model registry" in line, (args, line)
        assert "Traceback" not in done.stderr
