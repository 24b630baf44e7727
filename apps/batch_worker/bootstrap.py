"""The one-machine batch worker's composition root: its arguments and the home's adapters.

Why it is so: docs/adr/decisions/apps.md (batch_worker/).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from nodeau.adapters.batch_files import HomeJobs
from nodeau.adapters.batch_sender import HttpBatchSender
from nodeau.adapters.llama_server import LocalServerProcesses
from nodeau.adapters.private_files import keep_private
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.batch_worker.job import run_job
from nodeau.apps.serving.supervision import WATCH_S
from nodeau.apps.settings import utc_now
from nodeau.domain.restarts import KUBELET, RestartPolicy
from nodeau.ports.batches import BatchSender
from nodeau.ports.runtime import RunningServer


def http_sender(server: RunningServer) -> BatchSender:
    """The model server's own address, with its key."""
    return HttpBatchSender(server.base_url, server.auth_headers)


def run_in_home(
    name: str,
    home: Path,
    *,
    policy: RestartPolicy = KUBELET,
    now: Callable[[], datetime] = utc_now,
    every_s: float = WATCH_S,
    sender: Callable[[RunningServer], BatchSender] = http_sender,
) -> int:
    """Run job ``name`` of ``home`` with the home's state, files and model servers."""
    return run_job(
        name,
        state=SqliteStateStore(home / "state.sqlite3", now),
        jobs=HomeJobs(home),
        processes=LocalServerProcesses(os.environ),
        log_dir=home / "logs",
        sender=sender,
        now=now,
        policy=policy,
        every_s=every_s,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nodeau-batch-worker")
    parser.add_argument("--job", required=True)
    parser.add_argument("--home", required=True, type=Path)
    args = parser.parse_args(argv)
    keep_private(args.home)  # before it writes: ADR 0021
    return run_in_home(args.job, args.home)
