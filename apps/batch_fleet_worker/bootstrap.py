"""The fleet batch worker's composition root: its arguments, the cluster, the model server.

Why it is so: docs/adr/decisions/apps.md (batch_fleet_worker/).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from nodeau.adapters.batch_sender import HttpBatchSender
from nodeau.adapters.kube.batch_results import KubeFleetBatches
from nodeau.adapters.kube.client import connect
from nodeau.adapters.kube.server_keys import WORKER_VARIABLE
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.apps.batch_fleet_worker.job import run_fleet_job
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.errors import NodeauError


def main(argv: Sequence[str] | None = None) -> int:
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
