"""Files that hold prompts and answers are 0600 (folders 0700) even when the code writing them
runs without an entry point that set the umask (library use): under umask 022 here.

A batch job's files (adapters/batch_files.py) and the log the detached launchers open for a model
server or a batch worker (adapters/detached.py), with real processes for the launchers.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeau.adapters.batch_files import JobFiles, append_result, write_job, write_meta
from nodeau.adapters.detached import launcher_argv, reaped_launcher_argv
from nodeau.domain.batches import BatchRequest, BatchResult, LineProblem

SAY = (sys.executable, "-I", "-S", "-c", "print('the answer is 42')")


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_batch_jobs_requests_problems_counts_and_results_are_the_users_alone(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    files = JobFiles.of(home, "job1")
    request = BatchRequest(
        line_no=1,
        custom_id="r1",
        url="/v1/chat/completions",
        body={"messages": [{"role": "user", "content": "my secret question"}]},
    )
    write_job(files, [request], [LineProblem(line_no=2, problem="not JSON")], {"total": 1})
    write_meta(files, {"total": 1, "worker_pid": 1})
    append_result(
        files,
        BatchResult(id="b1", custom_id="r1", status_code=200, body={"answer": 42}, error=None),
    )
    assert {p.name: mode(p) for p in (home / "batches", files.folder)} == {
        "batches": 0o700,
        "job1": 0o700,
    }
    assert {p.name: mode(p) for p in sorted(files.folder.iterdir())} == {
        "job.json": 0o600,
        "problems.txt": 0o600,
        "requests.jsonl": 0o600,
        "results.jsonl": 0o600,
    }


def test_a_job_submitted_again_over_files_an_older_nodeau_wrote_makes_them_private(
    tmp_path: Path,
) -> None:
    files = JobFiles.of(tmp_path / "home", "job1")
    files.folder.mkdir(parents=True)
    for path in (files.requests, files.problems, files.job):
        path.write_text("old\n")
        assert mode(path) == 0o644
    write_job(files, [], [], {"total": 0})
    assert [mode(p) for p in (files.requests, files.problems, files.job)] == [0o600] * 3


def test_the_log_a_launcher_opens_is_0600(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    subprocess.run(launcher_argv(log, SAY), capture_output=True, check=True, timeout=60)
    reaped = tmp_path / "server.log"
    status = tmp_path / "server.exit.json"
    done = subprocess.run(
        reaped_launcher_argv(reaped, status, SAY), capture_output=True, check=True, timeout=60
    )
    deadline = time.monotonic() + 60
    while not status.exists():  # the reaper writes it once the command has ended
        assert time.monotonic() < deadline, "the reaper never wrote how the command ended"
        time.sleep(0.02)
    assert json.loads(status.read_text())["pid"] == int(done.stdout)
    assert (mode(log), mode(reaped)) == (0o600, 0o600)
    assert reaped.read_text() == "the answer is 42\n"
