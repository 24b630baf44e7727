"""The ports of batch jobs: one machine's jobs and their workers, the model server a worker
sends requests to, and on the fleet a job's results and a person's ask to stop it.

Why it is so: docs/adr/decisions/ports.md (batches.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from attrs import frozen

from nodeau.domain.batches import BatchRequest, BatchResult, LineProblem


@frozen(kw_only=True)
class JobProgress:
    """How far a job has come: requests to run, answered, failed, and lines that never ran."""

    total: int
    done: int
    failed: int
    bad_lines: int

    @property
    def left(self) -> int:
        return max(0, self.total - self.done - self.failed)


class MachineJobs(Protocol):
    """One machine's batch jobs, each kept by name: its requests, bad lines, results and
    notes (``meta``), and the detached worker that sends its requests."""

    def names(self) -> tuple[str, ...]:
        """Every job kept, in name order."""
        ...

    def exists(self, name: str) -> bool:
        """Whether a job called ``name`` is kept."""
        ...

    def write(
        self,
        name: str,
        requests: tuple[BatchRequest, ...],
        problems: tuple[LineProblem, ...],
        meta: Mapping[str, Any],
    ) -> None:
        """Keep a new job: what a submit knows (the user's prompts: private files)."""
        ...

    def start_worker(self, name: str) -> int:
        """Start the job's worker detached and note it; its pid (``RuntimeFailure`` when it
        cannot start)."""
        ...

    def stop_worker(self, name: str) -> bool:
        """Stop the job's worker (SIGTERM, then SIGKILL); whether one was running."""
        ...

    def meta(self, name: str) -> Mapping[str, Any]:
        """The job's notes ({} when none can be read)."""
        ...

    def progress(self, name: str) -> JobProgress:
        """The job's counts, from its notes and the results kept."""
        ...

    def results(self, name: str) -> tuple[dict[str, Any], ...]:
        """The job's results so far, as OpenAI batch output lines."""
        ...

    def where(self, name: str) -> str:
        """Where a person finds the job's results."""
        ...

    def requests(self, name: str) -> tuple[BatchRequest, ...]:
        """The job's requests that can run, in their file's order (its worker's)."""
        ...

    def answered(self, name: str) -> tuple[str, ...]:
        """The ``custom_id`` of each request that has a result kept (a line cut short by a
        crash is no result)."""
        ...

    def keep(self, name: str, result: BatchResult, *, retried: bool = False) -> None:
        """Keep one result as soon as it is had: a line written survives a crash.
        ``retried``: the request was sent again after its model server ended."""
        ...


class FleetBatches(Protocol):
    """A batch job's results as written so far, appended one at a time; its stop asked."""

    def lines(self, job: str) -> tuple[dict[str, Any], ...]:
        """The job's result lines in the order written (OpenAI batch output lines, with
        ``"retried": true`` where the worker says so); () when none is kept yet."""
        ...

    def append(self, job: str, line: Mapping[str, Any]) -> None:
        """Keep one more result line of the job; once this returns it is kept."""
        ...

    def ask_stop(self, job: str) -> bool:
        """Ask the job to stop (its spec says so; the controller ends it); False when there
        is no such job."""
        ...

    def where(self, job: str) -> str:
        """Where a person finds the job's results, as they would ask for them."""
        ...


class BatchSender(Protocol):
    """One model server, as a batch worker sends it requests."""

    def send(self, job: str, request: BatchRequest) -> BatchResult:
        """The request's result: the server's answer (an error above 399), or an error
        saying why no answer came."""
        ...

    def answering(self) -> bool:
        """Whether the server's ``/health`` answers 200 now."""
        ...

    def close(self) -> None:
        """Close its connections."""
        ...
