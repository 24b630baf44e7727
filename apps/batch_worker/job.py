"""One batch job's run on this machine: send each request, keep each result, free the card.

Why it is so: docs/adr/decisions/apps.md (batch_worker/).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from nodeau.apps.batches.lifecycle import finish
from nodeau.apps.serving.supervision import WATCH_S, Supervisor
from nodeau.domain.batches import still_to_run
from nodeau.domain.restarts import KUBELET, RestartPolicy
from nodeau.domain.workloads import WorkloadState, holds_gpu
from nodeau.ports.batches import BatchSender, MachineJobs
from nodeau.ports.errors import NodeauError
from nodeau.ports.runtime import RunningServer, ServerProcesses
from nodeau.ports.state import StateStore

STOP_GRACE_S = 10.0


def serving_server(supervisor: Supervisor, every_s: float) -> RunningServer | None:
    """The job's model server once it runs (restarted first if it ended); None when the job
    no longer holds its card (stopped meanwhile)."""
    while True:
        try:
            record = supervisor.check()
        except NodeauError as exc:  # the state busy, a stop refused: look again
            print(f"supervising the model server: {exc.one_line()}", file=sys.stderr)
            time.sleep(every_s)
            continue
        if record is None or not holds_gpu(record.workload.state):
            return None
        if record.workload.state is WorkloadState.RUNNING and record.server is not None:
            return record.server
        time.sleep(every_s)


class _Watch:
    """The job's server as last checked: looked at again once ``every_s`` has passed (a
    check reads the state, so not once per request), or at once when asked."""

    def __init__(self, supervisor: Supervisor, every_s: float) -> None:
        self._supervisor = supervisor
        self._every_s = every_s
        self._server: RunningServer | None = None
        self._checked = float("-inf")

    def server(self, *, now: bool = False) -> RunningServer | None:
        fresh = time.monotonic() - self._checked < self._every_s
        if now or self._server is None or not fresh:
            self._server = serving_server(self._supervisor, self._every_s)
            self._checked = time.monotonic()
        return self._server


class _Senders:
    """One sender per model server address and key (a restart has a key of its own)."""

    def __init__(self, sender: Callable[[RunningServer], BatchSender]) -> None:
        self._sender = sender
        self._senders: dict[tuple[str, str | None], BatchSender] = {}

    def to(self, server: RunningServer) -> BatchSender:
        at = (server.base_url, server.api_key)
        if at not in self._senders:
            self._senders[at] = self._sender(server)
        return self._senders[at]

    def close(self) -> None:
        for sender in self._senders.values():
            sender.close()


def run_job(
    name: str,
    *,
    state: StateStore,
    jobs: MachineJobs,
    processes: ServerProcesses,
    log_dir: Path,
    sender: Callable[[RunningServer], BatchSender],
    now: Callable[[], datetime],
    policy: RestartPolicy = KUBELET,
    every_s: float = WATCH_S,
) -> int:
    """Run job ``name`` to its end (0), or until it no longer holds its card (1)."""
    record = state.snapshot().named(name)
    if record is None or record.server is None or not holds_gpu(record.workload.state):
        print(f"batch {name}: no running job with a model server", file=sys.stderr)
        return 1
    supervisor = Supervisor(
        name, state=state, processes=processes, log_dir=log_dir, now=now, policy=policy
    )
    done = list(jobs.answered(name))
    senders = _Senders(sender)
    watching = _Watch(supervisor, every_s)
    try:
        for request in still_to_run(jobs.requests(name), done):
            server = watching.server()
            if server is None:
                print(f"batch {name}: stopped before its end", file=sys.stderr)
                return 1
            result = senders.to(server).send(name, request)
            retried = False
            if result.status_code is None:  # no answer: the server may have ended under it
                time.sleep(every_s)  # let its end be seen (and recorded) before looking
                server = watching.server(now=True)
                if server is None:
                    print(f"batch {name}: stopped before its end", file=sys.stderr)
                    return 1
                result = senders.to(server).send(name, request)
                retried = True
            jobs.keep(name, result, retried=retried)
    finally:
        senders.close()
    last = state.snapshot().named(name)
    if last is not None and last.server is not None and holds_gpu(last.workload.state):
        processes.stop(last.server, STOP_GRACE_S)
    finish(state, name, WorkloadState.SUCCEEDED, now())
    return 0
