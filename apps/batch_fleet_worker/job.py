"""A fleet batch job's run: send each request that has no result yet, keep each result.

Why it is so: docs/adr/decisions/apps.md (batch_fleet_worker/).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from nodeau.domain.batches import (
    BatchRequest,
    result_from_line,
    result_line,
    still_to_run,
)
from nodeau.ports.batches import BatchSender, FleetBatches

EVERY_S = 0.5


def answering(server: BatchSender, every_s: float) -> None:
    """Wait until the model server's ``/health`` answers 200."""
    while not server.answering():
        time.sleep(every_s)


def run_fleet_job(
    job: str,
    requests: Sequence[BatchRequest],
    results: FleetBatches,
    server: BatchSender,
    *,
    every_s: float = EVERY_S,
    log: Callable[[str], None] = print,
) -> int:
    """Send every request of ``job`` that has no result yet and keep each result (0)."""
    kept = (result_from_line(line) for line in results.lines(job))
    done = [r.custom_id for r in kept if r is not None]
    left = still_to_run(requests, done)
    log(f"batch {job}: {len(left)} of {len(requests)} requests to send")
    if left:
        answering(server, every_s)
    for request in left:
        result = server.send(job, request)
        retried = False
        if result.status_code is None:  # no answer: the server may have ended under it
            log(f"batch {job}: {request.custom_id}: no answer ({result.error}); once more")
            answering(server, every_s)
            result = server.send(job, request)
            retried = True
        line = result_line(result)
        if retried:
            line["retried"] = True
        results.append(job, line)
    log(f"batch {job}: every request has its result")
    return 0
