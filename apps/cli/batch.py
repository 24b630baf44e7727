"""``nodeau batch submit|status|results|stop``: finite sets of requests on the one-machine plane.

A submit admits and places like ``nodeau run`` (a workload of kind batch),
starts the model server, hands the requests to a detached worker and returns.
Bad lines are printed one per line and kept in the job's ``problems.txt``; a
file with no line that can run is refused before anything is admitted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cyclopts import App

from nodeau.apps.cli.render import size, table, to_json

if TYPE_CHECKING:
    from nodeau.apps.cli.plane import Plane
    from nodeau.domain.batches import BatchRequest, LineProblem
    from nodeau.domain.tasks import Task

batch_app = App(name="batch", help="Run a finite set of requests (OpenAI batch JSONL).")


@batch_app.command(name="submit")
def submit(
    file: Path,
    /,
    *,
    model: str,
    name: str | None = None,
    task: Literal["chat", "embed"] = "chat",
    context: int | None = None,
) -> int:
    """Admit, place and run every request of an OpenAI batch file; returns at once.

    Parameters
    ----------
    file
        The batch file: one JSON request per line (custom_id, method, url, body).
    model
        An alias, a catalog name or an artifact id held verified on this machine.
    name
        The job's name (default: the file's name without its suffix).
    task
        What the requests ask for: chat or embed.
    context
        Context size in tokens (default: the model's own, at most 4096).
    """
    from nodeau.apps.cli import plane as planes

    return submit_job(planes.build(), file, model=model, name=name, task=task, context=context)


def submit_job(
    plane: Plane, file: Path, *, model: str, name: str | None, task: str, context: int | None
) -> int:
    import os
    from datetime import timedelta

    from returns.pipeline import is_successful

    from nodeau.adapters.llama_server import find_llama_server
    from nodeau.apps.batches import (
        JobFiles,
        as_batch,
        finish,
        launch_worker,
        read_meta,
        start_batch_server,
        worker_command,
        write_job,
        write_meta,
    )
    from nodeau.apps.cli.bootstrap import utc_now
    from nodeau.apps.cli.run_command import admit_here, refused
    from nodeau.apps.models import resolve_model
    from nodeau.apps.serving import RunRequest
    from nodeau.domain.tasks import Task
    from nodeau.domain.workloads import RecoveryMode, WorkloadState
    from nodeau.ports.runtime import RuntimeFailure

    parsed = read_batch_file(file, Task(task))
    if parsed is None:
        return 1
    requests, problems = parsed
    s = plane.models.settings
    resolved = resolve_model(model, plane.models.registry.book(), plane.models.catalog())
    job = name or file.stem
    request = RunRequest(
        name=job,
        task=Task(task),
        context_tokens=context,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=3),
    )
    decided, reading = admit_here(plane, resolved, request, wrap=as_batch)
    if not is_successful(decided) or reading is None:
        return refused(decided.failure())
    admission = decided.unwrap()
    files = JobFiles.of(s.home, job)
    command = list(worker_command(job, s.home))
    binary = find_llama_server(os.environ)
    meta = {
        "name": job,
        "file": str(file.resolve()),
        "model": admission.record.workload.model,
        "total": len(requests),
        "bad_lines": len(problems),
        "llama_server": str(binary) if binary else None,
        "worker_command": command,
    }
    write_job(files, requests, problems, meta)
    record = start_batch_server(
        admission,
        reading=reading,
        runtime=plane.runtime(),
        state=plane.state,
        log_dir=s.log_dir,
        now=utc_now,
    )
    try:
        pid = launch_worker(files, command)
    except RuntimeFailure:
        if record.server is not None:
            plane.runtime().stop(record.server, grace_s=10.0)
        finish(plane.state, job, WorkloadState.FAILED, utc_now())
        raise
    write_meta(files, {**read_meta(files), "worker_pid": pid})
    hardware = " (SIMULATED card: the model runs on the CPU)" if reading.simulated else ""
    print(
        f"{job}: admitted on {record.workload.machine}, {record.workload.gpu_uuid}{hardware}, "
        f"reserving {size(admission.placement.reservation.bytes)}"
    )
    bad = f" ({len(problems)} bad lines skipped)" if problems else ""
    print(f"{job}: running {len(requests)} requests{bad}; nodeau batch status {job}")
    return 0


def read_batch_file(
    file: Path, task: Task
) -> tuple[tuple[BatchRequest, ...], tuple[LineProblem, ...]] | None:
    """The file's requests and bad lines (printed one per line); None when none can run."""
    from nodeau.domain.batches import parse_batch_lines
    from nodeau.domain.tasks import routes_for

    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        print(f"nodeau: {file}: cannot read it ({exc.strerror})", file=sys.stderr)
        return None
    requests, problems = parse_batch_lines(lines, routes_for(task))
    for problem in problems:
        print(f"{file}: {problem}", file=sys.stderr)
    if not requests:
        print(f"nodeau: {file}: no line can run; nothing was admitted", file=sys.stderr)
        return None
    return requests, problems


def job_status(name: str) -> dict[str, Any]:
    from nodeau.adapters.sqlite_state import SqliteStateStore
    from nodeau.apps.batches import JobFiles, progress, read_meta
    from nodeau.apps.cli.bootstrap import settings, utc_now
    from nodeau.domain.workloads import ps_sentence
    from nodeau.ports.state import UnknownWorkload

    s = settings()
    files = JobFiles.of(s.home, name)
    if not files.job.is_file():
        raise UnknownWorkload(f"no batch job called {name!r}; nodeau batch status lists them")
    record = SqliteStateStore(s.state_path, utc_now).snapshot().named(name)
    p = progress(files)
    return {
        "name": name,
        "model": read_meta(files).get("model"),
        "state": record.workload.state.value if record else "unknown",
        "sentence": ps_sentence(record.workload, utc_now()) if record else "",
        "total": p.total,
        "done": p.done,
        "failed": p.failed,
        "left": p.left,
        "bad_lines": p.bad_lines,
        "results": str(files.results),
    }


@batch_app.command(name="status")
def status(name: str | None = None, /, *, json: bool = False) -> int:
    """A job's counts and state (every job without a name).

    Parameters
    ----------
    name
        The job.
    json
        Print the status as JSON.
    """
    from nodeau.apps.cli.bootstrap import settings

    if name is not None:
        rows = [job_status(name)]
    else:
        root = settings().home / "batches"
        found = (
            sorted(p.name for p in root.iterdir() if (p / "job.json").is_file())
            if root.is_dir()
            else []
        )
        rows = [job_status(n) for n in found]
    if json:
        print(to_json(rows[0] if name is not None else rows))
        return 0
    print(
        table(
            ("NAME", "STATE", "TOTAL", "DONE", "FAILED", "LEFT", "BAD LINES", "NOW"),
            [
                (
                    r["name"],
                    r["state"],
                    str(r["total"]),
                    str(r["done"]),
                    str(r["failed"]),
                    str(r["left"]),
                    str(r["bad_lines"]),
                    r["sentence"],
                )
                for r in rows
            ],
        )
    )
    return 0


@batch_app.command(name="results")
def results(name: str, /) -> int:
    """The results written so far, in the OpenAI batch output format (JSONL).

    Parameters
    ----------
    name
        The job.
    """
    import json as jsonlib

    from nodeau.apps.batches import JobFiles, read_results
    from nodeau.apps.cli.bootstrap import settings
    from nodeau.domain.batches import result_line

    files = JobFiles.of(settings().home, name)
    job_status(name)  # an unknown job says so
    for result in read_results(files):
        print(jsonlib.dumps(result_line(result)))
    return 0


@batch_app.command(name="stop")
def stop(name: str, /) -> int:
    """Stop a job: its worker and model server; the card is freed, the results are kept.

    Parameters
    ----------
    name
        The job.
    """
    from nodeau.apps.batches import JobFiles, finish, stop_worker
    from nodeau.apps.cli import plane as planes
    from nodeau.apps.cli.bootstrap import utc_now
    from nodeau.domain.workloads import WorkloadState, holds_gpu

    job_status(name)
    plane = planes.build()
    files = JobFiles.of(plane.models.settings.home, name)
    stop_worker(files)
    record = plane.state.snapshot().named(name)
    if record is not None and holds_gpu(record.workload.state):
        if record.server is not None:
            plane.runtime().stop(record.server, grace_s=10.0)
        finish(plane.state, name, WorkloadState.STOPPED, utc_now())
    after = job_status(name)
    print(
        f"{name}: {after['state']}; {after['done'] + after['failed']} results kept "
        f"({files.results}); its card is free"
    )
    return 0
