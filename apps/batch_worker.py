"""The detached worker of one batch job: send each request, record each result, free the card.

Started by ``nodeau batch submit`` (``python -m nodeau.apps.batch_worker --job
NAME --home HOME``) in a session of its own. Requests whose ``custom_id``
already has a result are skipped, so a job run again redoes nothing. When the
last request is done it stops the model server and releases the reservation
(succeeded); if the server dies first, the job ends failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx

from nodeau.adapters.llama_server import LlamaServerRuntime
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.batches import (
    JobFiles,
    append_result,
    finish,
    read_meta,
    read_requests,
    read_results,
)
from nodeau.apps.settings import utc_now
from nodeau.domain.batches import BatchRequest, BatchResult, still_to_run
from nodeau.domain.workloads import WorkloadState, holds_gpu
from nodeau.ports.runtime import RunningServer

REQUEST_TIMEOUT_S = 600.0


def send(client: httpx.Client, job: str, request: BatchRequest) -> BatchResult:
    """One request to the model server, as its result (an error when no answer came)."""
    rid = f"batch_req_{job}_{request.line_no}"
    try:
        answer = client.post(request.url, json=dict(request.body))
    except httpx.HTTPError as exc:
        return BatchResult(
            id=rid, custom_id=request.custom_id, status_code=None, body=None, error=str(exc)
        )
    try:
        body = answer.json()
    except ValueError:
        body = answer.text
    error = None if answer.status_code < 400 else f"the model server answered {answer.status_code}"
    return BatchResult(
        id=rid, custom_id=request.custom_id, status_code=answer.status_code, body=body, error=error
    )


def run_job(name: str, home: Path) -> int:
    files = JobFiles.of(home, name)
    state = SqliteStateStore(home / "state.sqlite3", utc_now)
    record = state.snapshot().named(name)
    if record is None or record.server is None or not holds_gpu(record.workload.state):
        print(f"batch {name}: no running job with a model server", file=sys.stderr)
        return 1
    server: RunningServer = record.server
    runtime = LlamaServerRuntime(Path(str(read_meta(files).get("llama_server", "llama-server"))))
    done = [r.custom_id for r in read_results(files)]
    end = WorkloadState.SUCCEEDED
    with httpx.Client(
        base_url=server.base_url, trust_env=False, timeout=REQUEST_TIMEOUT_S
    ) as client:
        for request in still_to_run(read_requests(files), done):
            if not runtime.alive(server):
                print(f"batch {name}: the model server (pid {server.pid}) is gone", file=sys.stderr)
                end = WorkloadState.FAILED
                break
            append_result(files, send(client, name, request))
    runtime.stop(server, grace_s=10.0)
    finish(state, name, end, utc_now())
    return 0 if end is WorkloadState.SUCCEEDED else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nodeau-batch-worker")
    parser.add_argument("--job", required=True)
    parser.add_argument("--home", required=True, type=Path)
    args = parser.parse_args(argv)
    return run_job(args.job, args.home)


if __name__ == "__main__":
    sys.exit(main())
