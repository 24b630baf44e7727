"""What ``nodeau batch submit|status|results|stop`` asks and shows: views, ``BatchCommands``.

A job is admitted as a service is (the same checks, the same card rules); its counts are the
domain's (``batch_counts``) over the results kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from attrs import frozen

from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.serving.commands import Refused, Undecided

if TYPE_CHECKING:
    from nodeau.domain.batches import BatchRequest, LineProblem
    from nodeau.domain.tasks import Task


@frozen(kw_only=True)
class BatchAsk:
    """What ``nodeau batch submit`` asks for."""

    model: str
    name: str
    task: Task
    context_tokens: int | None
    requests: tuple[BatchRequest, ...]  # the lines that can run
    problems: tuple[LineProblem, ...]  # the lines that cannot, each naming its line
    source: str  # the file's path, for messages
    unproved: bool = False  # run an imported model for a task it has not proved


@frozen(kw_only=True)
class BatchView:
    """One row of ``nodeau batch status``."""

    name: str
    model: str | None
    state: str
    sentence: str
    total: int
    done: int
    failed: int
    left: int
    bad_lines: int
    results: str | None  # where the results are kept (this machine's path)


@frozen(kw_only=True)
class BatchSubmitted:
    """A batch job admitted and started, with its bad lines skipped."""

    job: BatchView
    workload: WorkloadView
    reserved_bytes: int
    source: str  # the reservation's figure: "estimated" or "measured"


BatchOutcome = BatchSubmitted | Refused | Undecided


class BatchCommands(Protocol):
    """``nodeau batch submit|status|results|stop`` on one plane."""

    def submit(self, ask: BatchAsk) -> BatchOutcome:
        """Admit and start a batch job."""
        ...

    def status(self, name: str | None) -> tuple[BatchView, ...]:
        """One job's status, or every job's."""
        ...

    def results(self, name: str) -> Iterator[dict[str, object]]:
        """The job's results so far, each an OpenAI batch output line."""
        ...

    def stop(self, name: str) -> str:
        """Stop a job and free its card; results already written stay."""
        ...
