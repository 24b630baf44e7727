"""``nodeau batch submit|status|results|stop``: finite sets of requests, on either plane.

Why it is so: docs/adr/decisions/apps-cli.md (batch.py).
"""

from __future__ import annotations

import json as jsonlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cyclopts import App

from nodeau.apps.batches.commands import BatchAsk, BatchSubmitted
from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import size, table, to_json
from nodeau.apps.cli.serving import report_run
from nodeau.domain.batches import parse_batch_lines
from nodeau.domain.runs import name_from_model
from nodeau.domain.tasks import Task, routes_for
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from nodeau.apps.batches.commands import BatchOutcome, BatchView

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
    unproved: bool = False,
    json: bool = False,
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
    unproved
        Run an imported model for a task its qualification has not proved (nodeau model
        qualify proves it); without it, such a job is refused, as nodeau run refuses it.
    json
        Print the result as JSON.
    """

    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise SettingsError(f"{file}: cannot read it ({exc.strerror})") from exc
    requests, problems = parse_batch_lines(lines, routes_for(Task(task)))
    for problem in problems:
        print(f"{file}: {problem}", file=sys.stderr)
    if not requests:
        print(f"nodeau: {file}: no line can run; nothing was admitted", file=sys.stderr)
        return 1
    job = name if name is not None else name_from_model(file.stem)
    if job is None:
        raise SettingsError(f"cannot make a job name from {file.name!r}; give --name")
    ask = BatchAsk(
        model=model,
        name=job,
        task=Task(task),
        context_tokens=context,
        requests=requests,
        problems=problems,
        source=str(file.resolve()),
        unproved=unproved,
    )
    return report_submit(bootstrap.plane().batches.submit(ask), json=json)


def report_submit(outcome: BatchOutcome, *, json: bool) -> int:

    if not isinstance(outcome, BatchSubmitted):
        return report_run(outcome, json=json)
    if json:
        print(to_json(outcome))
        return 0
    w, job = outcome.workload, outcome.job
    hardware = " (SIMULATED card: the model runs on the CPU)" if w.simulated else ""
    print(
        f"{w.name}: admitted on {w.machine}, {w.gpu}{hardware}, "
        f"reserving {size(outcome.reserved_bytes)} ({outcome.source})"
    )
    bad = f" ({job.bad_lines} bad lines skipped)" if job.bad_lines else ""
    print(f"{w.name}: running {job.total} requests{bad}; nodeau batch status {w.name}")
    return 0


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

    rows = bootstrap.plane().batches.status(name)
    if json:
        print(to_json(rows[0] if name is not None else rows))
        return 0
    print(table(STATUS_HEADERS, [status_row(r) for r in rows]))
    return 0


STATUS_HEADERS = ("NAME", "STATE", "TOTAL", "DONE", "FAILED", "LEFT", "BAD LINES", "NOW")


def status_row(r: BatchView) -> tuple[str, ...]:
    return (
        r.name,
        r.state,
        str(r.total),
        str(r.done),
        str(r.failed),
        str(r.left),
        str(r.bad_lines),
        r.sentence,
    )


@batch_app.command(name="results")
def results(name: str, /) -> int:
    """The results written so far, in the OpenAI batch output format (JSONL).

    Parameters
    ----------
    name
        The job.
    """

    for line in bootstrap.plane().batches.results(name):
        print(jsonlib.dumps(line))
    return 0


@batch_app.command(name="stop")
def stop(name: str, /) -> int:
    """Stop a job: its worker and model server; the card is freed, the results are kept.

    Parameters
    ----------
    name
        The job.
    """

    print(bootstrap.plane().batches.stop(name))
    return 0
