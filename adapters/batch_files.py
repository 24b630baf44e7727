"""A batch job's files on one machine and its detached worker process.

The folder ``<home>/batches/<name>/`` holds the requests, the bad lines, the results (one
line and an fsync each) and ``job.json`` (counts, the worker's pid and command line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from nodeau.adapters import processes
from nodeau.adapters.detached import launcher_argv
from nodeau.adapters.private_files import (
    PRIVATE_FILE,
    PRIVATE_FOLDER,
    replace_whole,
    write_private,
)
from nodeau.domain.batches import (
    BatchRequest,
    BatchResult,
    LineProblem,
    result_from_line,
    result_line,
)
from nodeau.ports.batches import JobProgress
from nodeau.ports.runtime import RuntimeFailure

WORKER_MODULE = "nodeau.apps.batch_worker"
_WORKER_STOP_S = 10.0


@frozen(kw_only=True)
class JobFiles:
    """Where one batch job keeps its requests, problems, results and worker."""

    folder: Path

    @classmethod
    def of(cls, home: Path, name: str) -> JobFiles:
        return cls(folder=home / "batches" / name)

    @property
    def requests(self) -> Path:
        return self.folder / "requests.jsonl"

    @property
    def problems(self) -> Path:
        return self.folder / "problems.txt"

    @property
    def results(self) -> Path:
        return self.folder / "results.jsonl"

    @property
    def job(self) -> Path:
        return self.folder / "job.json"

    @property
    def log(self) -> Path:
        return self.folder / "worker.log"


def write_job(
    files: JobFiles,
    requests: Iterable[BatchRequest],
    problems: Iterable[LineProblem],
    meta: dict[str, Any],
) -> None:
    """Write what a submit knows: the requests to run, the bad lines, the counts (the
    user's prompts: 0600 in a folder of 0700, whatever the umask)."""
    files.folder.parent.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
    files.folder.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)
    lines = [
        json.dumps({"line_no": r.line_no, "custom_id": r.custom_id, "url": r.url, "body": r.body})
        for r in requests
    ]
    write_private(files.requests, "".join(line + "\n" for line in lines).encode("utf-8"))
    write_private(files.problems, "".join(f"{p}\n" for p in problems).encode("utf-8"))
    write_meta(files, meta)


def write_meta(files: JobFiles, meta: dict[str, Any]) -> None:
    replace_whole(files.job, (json.dumps(meta, indent=2) + "\n").encode("utf-8"))


def read_meta(files: JobFiles) -> dict[str, Any]:
    try:
        meta = json.loads(files.job.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def read_requests(files: JobFiles) -> tuple[BatchRequest, ...]:
    out = []
    for line in files.requests.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        out.append(
            BatchRequest(
                line_no=item["line_no"],
                custom_id=item["custom_id"],
                url=item["url"],
                body=item["body"],
            )
        )
    return tuple(out)


def read_result_lines(files: JobFiles) -> tuple[dict[str, Any], ...]:
    """The result lines written so far, as written (``retried`` included); a line cut short
    by a crash is not a result."""
    try:
        text = files.results.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    lines = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if result_from_line(item) is not None:
            lines.append(item)
    return tuple(lines)


def read_results(files: JobFiles) -> tuple[BatchResult, ...]:
    """The results written so far; a line cut short by a crash is not a result."""
    results = (result_from_line(item) for item in read_result_lines(files))
    return tuple(r for r in results if r is not None)


def append_result(files: JobFiles, result: BatchResult, *, retried: bool = False) -> None:
    """Append one result as one write, then fsync: a written line survives a crash.
    ``retried``: the request was sent again after its model server ended (said in the line)."""
    line = result_line(result)
    if retried:
        line["retried"] = True
    data = (json.dumps(line) + "\n").encode("utf-8")
    fd = os.open(files.results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
    try:
        size = os.fstat(fd).st_size
        if size and _last_byte(files.results, size) != b"\n":
            data = b"\n" + data  # a line cut short by a crash stays on a line of its own
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as f:
        f.seek(size - 1)
        return f.read(1)


def progress(files: JobFiles) -> JobProgress:
    meta = read_meta(files)
    results = read_results(files)
    done = sum(1 for r in results if r.succeeded)
    return JobProgress(
        total=int(meta.get("total", 0)),
        done=done,
        failed=len(results) - done,
        bad_lines=int(meta.get("bad_lines", 0)),
    )


def worker_command(name: str, home: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", WORKER_MODULE, "--job", name, "--home", str(home))


def _worker(meta: dict[str, Any]) -> processes.OurProcess | None:
    """The worker ``job.json`` names: its pid, known by the command line it was started with."""
    pid = meta.get("worker_pid")
    command = meta.get("worker_command")
    if not isinstance(pid, int) or not isinstance(command, list):
        return None
    if not all(isinstance(a, str) for a in command):
        return None
    return processes.OurProcess(pid=pid, command=tuple(command))


def worker_alive(meta: dict[str, Any]) -> bool:
    """Whether the pid in ``job.json`` is still this job's worker (a reused pid is not)."""
    worker = _worker(meta)
    return worker is not None and processes.alive(worker)


def stop_worker(files: JobFiles) -> bool:
    """Stop the job's worker (SIGTERM, then SIGKILL); whether one was running."""
    worker = _worker(read_meta(files))
    if worker is None:
        return False
    try:
        return processes.terminate(worker, _WORKER_STOP_S, kill_wait_s=_WORKER_STOP_S)
    except processes.ProcessDenied as exc:
        raise RuntimeFailure(f"batch worker (pid {worker.pid}): no permission to stop it") from exc
    except processes.ProcessError as exc:
        raise RuntimeFailure(f"batch worker (pid {worker.pid}) still runs after SIGKILL") from exc


def launch_worker(files: JobFiles, command: Sequence[str]) -> int:
    """Start the job's worker detached (its output on ``worker.log``); its pid."""
    try:
        launched = subprocess.run(
            launcher_argv(files.log, command),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeFailure(f"batch {files.folder.name}: cannot start its worker: {exc}") from exc
    out = launched.stdout.decode("utf-8", "replace").strip()
    if launched.returncode != 0 or not out.isdigit():
        raise RuntimeFailure(f"batch {files.folder.name}: cannot start its worker: {out}")
    return int(out)


class HomeJobs:
    """``MachineJobs`` under ``<home>/batches/``, each job's worker a detached process."""

    def __init__(self, home: Path) -> None:
        self._home = home

    def _files(self, name: str) -> JobFiles:
        return JobFiles.of(self._home, name)

    def names(self) -> tuple[str, ...]:
        root = self._home / "batches"
        if not root.is_dir():
            return ()
        return tuple(sorted(p.name for p in root.iterdir() if (p / "job.json").is_file()))

    def exists(self, name: str) -> bool:
        return self._files(name).job.is_file()

    def write(
        self,
        name: str,
        requests: tuple[BatchRequest, ...],
        problems: tuple[LineProblem, ...],
        meta: Mapping[str, Any],
    ) -> None:
        write_job(self._files(name), requests, problems, dict(meta))

    def start_worker(self, name: str) -> int:
        files = self._files(name)
        command = list(worker_command(name, self._home))
        write_meta(files, {**read_meta(files), "worker_command": command})
        pid = launch_worker(files, command)
        write_meta(files, {**read_meta(files), "worker_pid": pid})
        return pid

    def stop_worker(self, name: str) -> bool:
        return stop_worker(self._files(name))

    def meta(self, name: str) -> Mapping[str, Any]:
        return read_meta(self._files(name))

    def progress(self, name: str) -> JobProgress:
        return progress(self._files(name))

    def results(self, name: str) -> tuple[dict[str, Any], ...]:
        return read_result_lines(self._files(name))

    def where(self, name: str) -> str:
        return str(self._files(name).results)

    def requests(self, name: str) -> tuple[BatchRequest, ...]:
        return read_requests(self._files(name))

    def answered(self, name: str) -> tuple[str, ...]:
        return tuple(r.custom_id for r in read_results(self._files(name)))

    def keep(self, name: str, result: BatchResult, *, retried: bool = False) -> None:
        append_result(self._files(name), result, retried=retried)
