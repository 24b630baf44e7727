"""A batch job's worker on the fleet: the second container of its Pod, beside the model server.

``python -m nodeau.apps.batch_fleet_worker --job NAME --server URL`` runs as
ServiceAccount ``nodeau-batch-worker`` (deploy/20-rbac.yaml). It reads the job's requests
from its BatchJob's spec, sends each one to the model server on the Pod's own loopback,
and keeps each result in the cluster (``ports.batches.FleetBatches``: ConfigMaps owned
by the BatchJob) as soon as it has it. Then it exits 0; it decides nothing else: the
controller sees the results complete, records the job succeeded, deletes the Pod and
frees the card (``domain.batches.batch_end``). Decisions, the one-machine worker's
(``apps/batch_worker.py``) where they fit:

* A request whose ``custom_id`` already has a result is not sent again: a worker
  restarted (the Pod's ``OnFailure``) or started again resumes where it was.
* A request that got no answer (the server died under it: the kubelet restarts a server
  container that fails) is sent once more when the server answers again, and its result
  line says ``"retried": true``; the second answer, whatever it is, is its result.
* Before the first request it waits for the server's ``/health`` to answer 200 (the
  model loading); a server that never answers is the kubelet's to restart or the
  startup probe's to end, so the worker waits as long as it runs.
* A failure to keep a result (the API server unreachable) ends the worker with status 1
  and one line; the kubelet starts it again and it resumes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from nodeau.apps.batch_worker import REQUEST_TIMEOUT_S, send
from nodeau.domain.batches import (
    BatchRequest,
    result_from_line,
    result_line,
    still_to_run,
)
from nodeau.ports.batches import FleetBatches
from nodeau.ports.errors import NodeauError

EVERY_S = 0.5


def answering(client: httpx.Client, every_s: float) -> None:
    """Wait until the model server's ``/health`` answers 200."""
    while True:
        try:
            if client.get("/health", timeout=5.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(every_s)


def run_fleet_job(
    job: str,
    requests: Sequence[BatchRequest],
    results: FleetBatches,
    client: httpx.Client,
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
        answering(client, every_s)
    for request in left:
        result = send(client, job, request)
        retried = False
        if result.status_code is None:  # no answer: the server may have ended under it
            log(f"batch {job}: {request.custom_id}: no answer ({result.error}); once more")
            answering(client, every_s)
            result = send(client, job, request)
            retried = True
        line = result_line(result)
        if retried:
            line["retried"] = True
        results.append(job, line)
    log(f"batch {job}: every request has its result")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
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
        with httpx.Client(
            base_url=args.server,
            headers={"Authorization": f"Bearer {key}"} if key else None,
            trust_env=False,
            timeout=REQUEST_TIMEOUT_S,
        ) as client:
            return run_fleet_job(
                args.job, found.ask.requests, KubeFleetBatches(api), client,
                log=lambda line: print(line, flush=True),
            )  # fmt: skip
    except NodeauError as exc:
        print(f"batch {args.job}: {exc.one_line()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
