"""A ``nodeau run`` interrupted while its model loads leaves no model server nobody knows.

The real llama-server is held loading (SIGSTOP). Ctrl-C, SIGTERM and SIGHUP stop it and free
its card; after SIGKILL, ``ps`` says the start was interrupted and ``stop --workload`` ends it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.domain.records import RunningServer
from nodeau.domain.workloads import WorkloadState
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli

NOW = datetime(2026, 12, 2, tzinfo=UTC)
WAIT_S = 60.0


def gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def recorded_while_starting(home: Path, run: subprocess.Popen[str]) -> RunningServer:
    """The model server the run recorded while its workload still starts."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and run.poll() is None:
        if (home / "state.sqlite3").exists():
            record = SqliteStateStore(home / "state.sqlite3", lambda: NOW).snapshot().named("tiny")
            starting = record is not None and record.workload.state is WorkloadState.STARTING
            if starting and record is not None and record.server is not None:
                return record.server
        time.sleep(0.005)
    raise AssertionError(f"no server recorded while starting; run: {run.communicate()}")


def started_and_held(tmp_path: Path) -> tuple[Cli, subprocess.Popen[str], RunningServer]:
    """A run whose model server is recorded and then held (stopped) before it answers."""
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=5)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    run = cli.start("run", "tiny", "--unproved", "--context", "256")
    server = recorded_while_starting(tmp_path / "home", run)
    os.kill(server.pid, signal.SIGSTOP)
    return cli, run, server


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_run_stops_its_server_and_frees_the_card(
    tmp_path: Path, sig: signal.Signals
) -> None:
    cli, run, server = started_and_held(tmp_path)
    try:
        run.send_signal(sig)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    _, err = run.communicate(timeout=WAIT_S)
    assert run.returncode == 130, err
    assert "nodeau: run tiny interrupted" in err
    deadline = time.monotonic() + WAIT_S
    while not gone(server.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(server.pid), "its model server was stopped"
    assert json.loads(cli("ps", "--json").stdout) == [], "nothing holds the card"


def test_a_killed_run_leaves_a_record_ps_explains_and_stop_ends_its_server(
    tmp_path: Path,
) -> None:
    cli, run, server = started_and_held(tmp_path)
    try:
        run.kill()
        run.communicate(timeout=WAIT_S)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    try:
        [row] = json.loads(cli("ps", "--json").stdout)
        assert row["state"] == "starting"
        shown = cli("ps").stdout
        assert "its start was interrupted" in shown, shown
        assert f"pid {server.pid}" in shown and "nodeau stop tiny --workload" in shown
        assert not gone(server.pid), "the server it left still runs"
        second = cli("run", "tiny", "--unproved", "--name", "other", "--context", "256")
        assert second.returncode != 0, "the card is still held for the first"
    finally:
        stopped = cli("stop", "tiny", "--workload")
    assert stopped.returncode == 0, stopped.stderr
    assert gone(server.pid), "stop --workload ended the server the record names"
    assert json.loads(cli("ps", "--json").stdout) == []
