"""Everything of a user's under NODEAU_HOME is 0600 (folders 0700), whatever the umask.

Each command runs under ``umask 022``: the installed ``nodeau``, its batch worker, a real
llama-server. ``models/`` holds nothing secret and is left as it is (docs/adr/0021).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.settings import utc_now
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import NODEAU, Cli
from tests.support.real.llama import llama_server_binary

STALL_S = 120.0  # a job that answers nothing new for this long is stuck (a slow one is not)
UMASK_022 = ("sh", "-c", 'umask 022; exec "$@"', "sh")


class Umask022Cli(Cli):
    """``nodeau`` started by a shell whose umask is 022, the usual default."""

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*UMASK_022, str(NODEAU), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
            check=False,
        )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def open_to_others(home: Path) -> dict[str, int]:
    """Each path under ``home`` (the model cache apart) that group or others may use."""
    found = {}
    for path in [home, *home.rglob("*")]:
        relative = path.relative_to(home)
        if relative.parts[:1] == ("models",) or path.is_symlink():
            continue
        if mode(path) & 0o077:
            found[str(relative)] = mode(path)
    return found


def request(custom_id: str) -> str:
    return json.dumps(
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "tiny",
                "messages": [{"role": "user", "content": f"my private question {custom_id}"}],
                "max_tokens": 4,
            },
        }
    )


def wait_until_succeeded(cli: Cli, name: str) -> None:
    """Polls the job; fails when it stops making progress for STALL_S, however slow."""
    deadline, seen = time.monotonic() + STALL_S, None
    while True:
        done = cli("batch", "status", name, "--json")
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        if status["state"] == "succeeded":
            return
        assert status["state"] not in ("failed", "stopped"), status
        now = (status["done"], status["failed"], status["state"])
        if now != seen:
            seen, deadline = now, time.monotonic() + STALL_S
        assert time.monotonic() < deadline, f"{name} stopped getting anywhere: {status}"
        time.sleep(0.2)


def test_importing_a_model_into_a_new_home_under_umask_022_leaves_nothing_open(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    cli = Umask022Cli(home)
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, quant="q8_0")
    done = cli("models", "import", str(model), "--alias", "tiny")
    assert done.returncode == 0, done.stderr
    assert (mode(home), mode(home / "registry.sqlite3")) == (0o700, 0o600)
    assert open_to_others(home) == {}


@pytest.mark.slow
def test_a_batch_run_under_umask_022_keeps_its_prompts_results_ledger_and_logs_private(
    tmp_path: Path,
) -> None:
    llama_server_binary()  # a failure, not a skip, when there is none
    home = tmp_path / "home"
    cli = Umask022Cli(home, NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, quant="q8_0")
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    batch = tmp_path / "jobs.jsonl"
    batch.write_text(f"{request('r1')}\n{request('r2')}\nnot json\n", encoding="utf-8")
    try:
        done = cli("batch", "submit", str(batch), "--model", "tiny", "--unproved", "--name", "job1")
        assert done.returncode == 0, done.stderr
        wait_until_succeeded(cli, "job1")
    finally:
        cli("batch", "stop", "job1")
    job = home / "batches" / "job1"
    written = [
        job / "requests.jsonl",
        job / "results.jsonl",
        job / "problems.txt",
        job / "job.json",
        job / "worker.log",
        home / "state.sqlite3",
        home / "logs" / "job1.log",  # the model server's
    ]
    assert {str(p.relative_to(home)): mode(p) for p in written} == {
        str(p.relative_to(home)): 0o600 for p in written
    }
    assert "my private question r1" in (job / "requests.jsonl").read_text()
    assert len((job / "results.jsonl").read_text().splitlines()) == 2
    assert {str(p.relative_to(home)): mode(p) for p in (home, home / "batches", job)} == {
        ".": 0o700,
        "batches": 0o700,
        "batches/job1": 0o700,
    }
    assert open_to_others(home) == {}


def test_the_next_command_closes_a_home_an_older_nodeau_left_open(tmp_path: Path) -> None:
    """A home written under umask 022 before its files were private (0755 folders, 0644
    files), then one ``nodeau ps``: only the model cache is left as it was."""
    home = tmp_path / "home"
    previous = os.umask(0o022)
    try:
        (home / "batches" / "job1").mkdir(parents=True)
        (home / "logs").mkdir()
        (home / "models" / "blobs").mkdir(parents=True)
        (home / "batches" / "job1" / "requests.jsonl").write_text(request("r1") + "\n")
        (home / "batches" / "job1" / "results.jsonl").write_text('{"custom_id": "r1"}\n')
        (home / "logs" / "job1.log").write_text("prompt eval: my private question\n")
        (home / "models" / "blobs" / "ab").write_bytes(b"weights")
        (home / "models" / "blobs" / "ab").chmod(0o444)
        SqliteStateStore(home / "state.sqlite3", clock=utc_now).snapshot()
    finally:
        os.umask(previous)
    assert open_to_others(home) != {}
    done = Umask022Cli(home)("ps", "--json")
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
    assert open_to_others(home) == {}
    assert mode(home / "state.sqlite3") == 0o600
    assert (mode(home / "models"), mode(home / "models" / "blobs" / "ab")) == (0o755, 0o444)
