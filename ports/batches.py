"""The port of a batch job's records on the fleet: its results, and a person's ask to stop it.

Why it is so: docs/adr/decisions/ports.md (batches.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


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
