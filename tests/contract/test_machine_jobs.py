"""``MachineJobs`` as ``HomeJobs`` keeps it: a job's requests, notes and results under the
home, its counts, where a person finds its results, and its worker started and stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nodeau.adapters import processes
from nodeau.adapters.batch_files import HomeJobs, JobFiles, append_result
from nodeau.domain.batches import BatchRequest, BatchResult, LineProblem
from nodeau.ports.batches import JobProgress, MachineJobs

REQUESTS = tuple(
    BatchRequest(
        line_no=n,
        custom_id=f"r{n}",
        url="/v1/chat/completions",
        body={"messages": [{"role": "user", "content": f"hello {n}"}]},
    )
    for n in (1, 2, 3)
)
PROBLEMS = (LineProblem(line_no=4, problem="not JSON"),)


@pytest.fixture
def jobs(tmp_path: Path) -> MachineJobs:
    return HomeJobs(tmp_path / "home")


def written(jobs: MachineJobs, name: str = "job") -> MachineJobs:
    jobs.write(name, REQUESTS, PROBLEMS, {"model": "tiny", "total": 3, "bad_lines": 1})
    return jobs


def test_a_job_is_kept_by_name_with_its_notes(jobs: MachineJobs) -> None:
    assert (jobs.names(), jobs.exists("job"), dict(jobs.meta("job"))) == ((), False, {})
    written(written(jobs, "b-job"), "a-job")
    assert jobs.names() == ("a-job", "b-job")
    assert jobs.exists("a-job") and not jobs.exists("c-job")
    assert dict(jobs.meta("a-job")) == {"model": "tiny", "total": 3, "bad_lines": 1}


def test_counts_come_from_the_notes_and_the_results_kept(jobs: MachineJobs, tmp_path: Path) -> None:
    written(jobs)
    assert jobs.progress("job") == JobProgress(total=3, done=0, failed=0, bad_lines=1)
    files = JobFiles.of(tmp_path / "home", "job")
    append_result(
        files, BatchResult(id="b1", custom_id="r1", status_code=200, body={"ok": True}, error=None)
    )
    append_result(
        files,
        BatchResult(id="b2", custom_id="r2", status_code=500, body={"error": "x"}, error=None),
    )
    progress = jobs.progress("job")
    assert (progress.done, progress.failed, progress.left) == (1, 1, 1)
    assert [line["custom_id"] for line in jobs.results("job")] == ["r1", "r2"]
    assert jobs.where("job") == str(files.results)


def test_a_started_worker_is_noted_and_stopped(jobs: MachineJobs, tmp_path: Path) -> None:
    written(jobs)
    assert jobs.stop_worker("job") is False  # none was started
    pid = jobs.start_worker("job")
    meta = jobs.meta("job")
    assert meta["worker_pid"] == pid and meta["model"] == "tiny"
    assert meta["worker_command"][-4:] == ["--job", "job", "--home", str(tmp_path / "home")]
    jobs.stop_worker("job")  # True if it still ran, False if it had ended on its own
    worker = processes.OurProcess(pid=pid, command=tuple(meta["worker_command"]))
    deadline = time.monotonic() + 10
    while processes.alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes.alive(worker)


def test_its_worker_reads_the_requests_and_keeps_each_result_once_had(
    jobs: MachineJobs, tmp_path: Path
) -> None:
    written(jobs)
    assert jobs.requests("job") == REQUESTS
    assert jobs.answered("job") == ()
    ok = BatchResult(id="b1", custom_id="r1", status_code=200, body={"ok": True}, error=None)
    jobs.keep("job", ok)
    again = BatchResult(id="b2", custom_id="r2", status_code=None, body=None, error="refused")
    jobs.keep("job", again, retried=True)
    assert jobs.answered("job") == ("r1", "r2")
    assert [line.get("retried", False) for line in jobs.results("job")] == [False, True]
    # a line cut short by a crash is no result: its request is sent again
    with JobFiles.of(tmp_path / "home", "job").results.open("ab") as results:
        results.write(b'{"id": "b3", "custom_id": "r3", "respo')
    assert jobs.answered("job") == ("r1", "r2")
    jobs.keep("job", BatchResult(id="b3", custom_id="r3", status_code=200, body={}, error=None))
    assert jobs.answered("job") == ("r1", "r2", "r3")
