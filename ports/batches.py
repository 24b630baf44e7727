"""The port of a batch job's records on the fleet: its results, and a person's ask to stop it.

On one machine a job's results are a file (``apps/batches.py``); on a fleet they are
kept in the cluster, so that ``nodeau batch results`` reads them through the control
plane wherever the job ran (docs/adr/0016-batch-jobs-on-the-fleet.md).
``nodeau.adapters.kube.batch_results`` implements it on a Kubernetes API server.
Failures are ``ClusterError`` as for every cluster port.
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
