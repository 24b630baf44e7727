"""Batch jobs on the one-machine plane: their model server started, and their end recorded.

Why it is so: docs/adr/decisions/apps.md (batches/lifecycle.py and batch_files.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from attrs import evolve

from nodeau.apps.serving.model_servers import launch_server
from nodeau.domain.lifecycle import ServerPhase, server_moved
from nodeau.domain.lifecycle import with_state as in_state
from nodeau.domain.records import Starter
from nodeau.domain.workloads import WorkloadState, holds_gpu
from nodeau.ports.runtime import ModelRuntime
from nodeau.ports.state import Admission, StateStore, WorkloadRecord


def start_batch_server(
    admission: Admission,
    *,
    simulated: bool,
    runtime: ModelRuntime,
    state: StateStore,
    log_dir: Path,
    now: Callable[[], datetime],
    starter: Starter,
) -> WorkloadRecord:
    """Start the admitted job's model server and record it running (or failed)."""
    server = launch_server(
        admission,
        simulated=simulated,
        runtime=runtime,
        state=state,
        log_dir=log_dir,
        now=now,
        starter=starter,
    )
    at = now()
    return state.update(
        admission.record.workload.name,
        lambda r: evolve(server_moved(r, ServerPhase.READY, at), server=server),
    )


def finish(state: StateStore, name: str, end: WorkloadState, at: datetime) -> WorkloadRecord:
    """Free the card with ``end``; a job that already finished keeps the end it had."""

    def change(r: WorkloadRecord) -> WorkloadRecord:
        if not holds_gpu(r.workload.state):
            return r
        return evolve(in_state(r, end, at), server=None)

    return state.release(name, change)
