"""Batch jobs end to end: submit an OpenAI batch file, watch it run, read its results, stop one.

Real parts only: the installed ``nodeau`` command, a real llama-server on a
tiny GGUF model, the detached batch worker. The cards are simulated
("1 x 24 GiB"), so the model runs on the CPU. Every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nodeau.adapters.sqlite_state import SqliteStateStore
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli as BaseCli

STALL_S = 120.0  # a job that answers nothing new for this long is stuck (a slow one is not)


class Cli(BaseCli):
    def __init__(self, home: Path) -> None:
        super().__init__(home, NODEAU_SIMULATED_GPUS="1 x 24 GiB")

    def status(self, name: str) -> dict[str, Any]:
        done = self("batch", "status", name, "--json")
        assert done.returncode == 0, done.stderr
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def wait_for(self, name: str, ready: Any) -> dict[str, Any]:
        """The job's status once ``ready``; fails when it stops making progress (no new
        result and no new state for STALL_S), however slow the machine is."""
        deadline = time.monotonic() + STALL_S
        seen: tuple[object, ...] = ()
        while True:
            status = self.status(name)
            if ready(status):
                return status
            now = (status["done"], status["failed"], status["state"])
            if now != seen:
                seen, deadline = now, time.monotonic() + STALL_S
            assert time.monotonic() < deadline, f"{name} stopped getting anywhere: {status}"
            time.sleep(0.2)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home")
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, quant="q8_0")
    assert c("models", "import", str(path), "--alias", "tiny").returncode == 0
    yield c
    # leave no worker, model server or endpoint behind, whatever the test did
    listed = c("batch", "status", "--json")
    if listed.returncode == 0:
        for row in json.loads(listed.stdout):
            c("batch", "stop", row["name"])


def request(custom_id: str, tokens: int = 4) -> str:
    return json.dumps(
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "tiny",
                "messages": [{"role": "user", "content": f"hello {custom_id}"}],
                "max_tokens": tokens,
            },
        }
    )


def result_ids(cli: Cli, name: str) -> list[str]:
    done = cli("batch", "results", name)
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["custom_id"] for line in done.stdout.splitlines()]


@pytest.mark.slow
def test_a_batch_runs_its_good_lines_reports_its_bad_one_and_frees_the_card(
    cli: Cli, tmp_path: Path
) -> None:
    lines = [request("r1"), request("r2"), '{"custom_id": "r3", "method": "GET"}']
    lines += [request("r4"), request("r5")]
    file = tmp_path / "jobs.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    done = cli("batch", "submit", str(file), "--model", "tiny", "--unproved", "--name", "job1")
    assert done.returncode == 0, done.stderr
    assert "line 3: method must be POST" in done.stderr
    assert "running 4 requests (1 bad lines skipped)" in done.stdout
    assert re.search(r", reserving [\d.]+ [MG]iB \(estimated\)$", done.stdout.splitlines()[0])
    status = cli.wait_for("job1", lambda s: s["state"] == "succeeded")
    assert (status["total"], status["done"], status["failed"], status["bad_lines"]) == (4, 4, 0, 1)
    assert status["left"] == 0
    assert status["sentence"].startswith("succeeded on testbox")

    results = [json.loads(x) for x in cli("batch", "results", "job1").stdout.splitlines()]
    assert sorted(r["custom_id"] for r in results) == ["r1", "r2", "r4", "r5"]
    for r in results:
        assert r["error"] is None
        assert r["response"]["status_code"] == 200
        assert r["response"]["body"]["choices"][0]["message"]["content"] is not None
    problems = (tmp_path / "home" / "batches" / "job1" / "problems.txt").read_text()
    assert problems.startswith("line 3: method must be POST")

    assert json.loads(cli("ps", "--json").stdout) == []  # the card is free
    table = cli("batch", "status")
    assert "job1" in table.stdout and "succeeded" in table.stdout
    listed = json.loads(cli("batch", "status", "--json").stdout)
    assert [row["name"] for row in listed] == ["job1"]


def test_a_file_with_no_good_line_is_refused_before_admission(cli: Cli, tmp_path: Path) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text("{oops\n" + request("a").replace("POST", "PUT") + "\n", encoding="utf-8")
    done = cli("batch", "submit", str(file), "--model", "tiny", "--unproved")
    assert done.returncode == 1
    assert "line 1: not valid JSON" in done.stderr
    assert "line 2: method must be POST, not 'PUT'" in done.stderr
    assert "nothing was admitted" in done.stderr
    assert json.loads(cli("ps", "--json").stdout) == []
    assert json.loads(cli("batch", "status", "--json").stdout) == []
    unknown = cli("batch", "results", "bad")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("nodeau: no batch job called 'bad'")


@pytest.mark.slow
def test_stop_keeps_what_is_done_and_a_second_run_does_nothing_twice(
    cli: Cli, tmp_path: Path
) -> None:
    ids = [f"q{n}" for n in range(1000)]  # long enough that ps and stop come before its end
    file = tmp_path / "long.jsonl"
    file.write_text("".join(request(i, tokens=32) + "\n" for i in ids), encoding="utf-8")
    done = cli("batch", "submit", str(file), "--model", "tiny", "--unproved", "--name", "long")
    assert done.returncode == 0, done.stderr
    running = cli.wait_for("long", lambda s: s["done"] >= 1)
    assert running["state"] == "running"
    ps = json.loads(cli("ps", "--json").stdout)
    assert [(r["kind"], r["state"]) for r in ps] == [("batch", "running")]

    stopped = cli("batch", "stop", "long")
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stdout and "its card is free" in stopped.stdout
    kept = result_ids(cli, "long")
    status = cli.status("long")
    assert status["state"] == "stopped"
    assert 1 <= len(kept) < len(ids)
    assert status["done"] + status["failed"] == len(kept)
    assert json.loads(cli("ps", "--json").stdout) == []
    time.sleep(0.5)
    assert result_ids(cli, "long") == kept  # nothing runs on after a stop

    # submitted again, the job runs only what has no result yet
    again = cli("batch", "submit", str(file), "--model", "tiny", "--unproved", "--name", "long")
    assert again.returncode == 0, again.stderr
    cli.wait_for("long", lambda s: s["state"] == "succeeded")
    final = result_ids(cli, "long")
    assert final[: len(kept)] == kept
    assert sorted(final) == sorted(ids)  # each once: nothing lost, nothing twice


@pytest.mark.slow
def test_a_job_whose_model_server_is_killed_mid_run_resumes_and_answers_each_request_once(
    cli: Cli, tmp_path: Path
) -> None:
    # enough requests that the job is still running when the test looks, on a loaded machine
    # (CI once saw 200 of them all answered between two looks)
    ids = [f"k{n}" for n in range(600)]
    file = tmp_path / "killed.jsonl"
    file.write_text("".join(request(i, tokens=32) + "\n" for i in ids), encoding="utf-8")
    done = cli("batch", "submit", str(file), "--model", "tiny", "--unproved", "--name", "killed")
    assert done.returncode == 0, done.stderr
    cli.wait_for("killed", lambda s: s["done"] >= 5)
    state = SqliteStateStore(tmp_path / "home" / "state.sqlite3", lambda: datetime.now(UTC))
    record = state.snapshot().named("killed")
    assert record is not None and record.server is not None
    os.killpg(record.server.pid, signal.SIGKILL)

    restarting = cli.wait_for("killed", lambda s: s["state"] != "running")
    assert restarting["state"] == "restarting"
    assert (
        restarting["sentence"].startswith("restarting on testbox (SIM-GPU-…) since ")
        and ": its model server was killed by signal 9 (SIGKILL) at " in restarting["sentence"]
    )
    assert restarting["sentence"].split("; ")[-1].startswith("restart 1, next attempt at ")
    ps = json.loads(cli("ps", "--json").stdout)
    assert [(r["name"], r["state"]) for r in ps] == [("killed", "restarting")]  # card kept

    status = cli.wait_for("killed", lambda s: s["state"] == "succeeded")
    assert (status["total"], status["done"], status["failed"], status["left"]) == (600, 600, 0, 0)
    results = [json.loads(x) for x in cli("batch", "results", "killed").stdout.splitlines()]
    assert sorted(r["custom_id"] for r in results) == sorted(ids)  # each once, none lost
    assert all(r["response"]["status_code"] == 200 and r["error"] is None for r in results)
    assert len([r for r in results if r.get("retried")]) <= 1  # the one in flight, if any
    assert status["sentence"].startswith("succeeded on testbox")
    assert json.loads(cli("ps", "--json").stdout) == []  # the card is free


def test_a_model_that_never_proved_chat_is_refused_a_batch_job_as_run_refuses_it(
    cli: Cli, tmp_path: Path
) -> None:
    file = tmp_path / "jobs.jsonl"
    file.write_text(request("r1") + "\n", encoding="utf-8")
    refused = cli("batch", "submit", str(file), "--model", "tiny", "--name", "unproved")
    served = cli("run", "tiny", "--name", "unproved")
    assert (refused.returncode, served.returncode) == (2, 2)
    said = "qualification.task-not-proved: tiny has not proved it can chat"
    assert said in refused.stderr and said in served.stderr
    assert refused.stderr == served.stderr, "the same refusal, word for word"
    assert json.loads(cli("batch", "status", "--json").stdout) == [], "nothing was admitted"
    assert json.loads(cli("ps", "--json").stdout) == []
