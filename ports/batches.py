"""The ports of batch jobs: the model server a worker sends requests to, and on the fleet
a job's results and a person's ask to stop it.

Why it is so: docs/adr/decisions/ports.md (batches.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from nodeau.domain.batches import BatchRequest, BatchResult


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
