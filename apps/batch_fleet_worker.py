"""A batch job's worker on the fleet: the second container of its Pod, beside the model server.

Why it is so: docs/adr/decisions/apps.md (batch_fleet_worker.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from nodeau.domain.batches import (
    BatchRequest,
    result_from_line,
    result_line,
    still_to_run,
)
from nodeau.ports.batches import BatchSender, FleetBatches
from nodeau.ports.errors import NodeauError

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


def main(argv: Sequence[str] | None = None) -> int:
    from nodeau.adapters.batch_sender import HttpBatchSender
    from nodeau.adapters.kube.batch_results import KubeFleetBatches
    from nodeau.adapters.kube.client import connect
    from nodeau.adapters.kube.server_keys import WORKER_VARIABLE
    from nodeau.adapters.kube.workloads import KubeWorkloadObjects
    from nodeau.domain.workloads import WorkloadKind

    parser = argparse.ArgumentParser(prog="python -m nodeau.apps.batch_fleet_worker")
    parser.add_argument("--job", required=True, help="the BatchJob in nodeau-system")
    parser.add_argument("--server", required=True, help="the model server's address")
    parser.add_argument("--kubeconfig", type=Path, help="default: the Pod's ServiceAccount")
    args = parser.parse_args(argv)
    try:
        api = connect(args.kubeconfig, None, os.environ).api
        found = KubeWorkloadObjects(api).get(WorkloadKind.BATCH, args.job)
        if found is None or found.ask is None:
            print(f"batch {args.job}: no BatchJob with requests to send", file=sys.stderr)
            return 2
        key = os.environ.get(WORKER_VARIABLE, "")  # its server's key (the Pod's Secret)
        server = HttpBatchSender(args.server, {"Authorization": f"Bearer {key}"} if key else None)
        try:
            return run_fleet_job(
                args.job, found.ask.requests, KubeFleetBatches(api), server,
                log=lambda line: print(line, flush=True),
            )  # fmt: skip
        finally:
            server.close()
    except NodeauError as exc:
        print(f"batch {args.job}: {exc.one_line()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
