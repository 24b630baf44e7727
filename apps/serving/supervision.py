"""A workload's supervision on one machine: its model server watched and started again when
it ends, as its restart policy says.

Why it is so: docs/adr/0007-supervision.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from attrs import evolve

from nodeau.apps.serving.model_servers import READY_TIMEOUT_S, STOP_GRACE_S
from nodeau.domain import restarts
from nodeau.domain.restarts import KUBELET, RestartPolicy
from nodeau.domain.workloads import ServerExit, WorkloadState, exit_words, holds_gpu, next_clause
from nodeau.ports.runtime import RunningServer, RuntimeFailure, ServerProcesses, ServerSpec
from nodeau.ports.state import Event, StateStore, WorkloadRecord

WATCH_S = 0.5  # how often a supervisor looks at its model server
_REASON_CHARS = 200


class _NotRestarting(Exception):
    """The workload left ``restarting`` while a restart was being made."""


class Supervisor:
    """Watches workload ``name``'s model server and starts it again when it ends."""

    def __init__(
        self,
        name: str,
        *,
        state: StateStore,
        processes: ServerProcesses,
        log_dir: Path,
        now: Callable[[], datetime],
        policy: RestartPolicy = KUBELET,
        ready_timeout_s: float = READY_TIMEOUT_S,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """``changed`` is called after each change recorded (the endpoint forgets what it
        cached)."""
        self._name = name
        self._state = state
        self._processes = processes
        self._log_dir = log_dir
        self._now = now
        self._policy = policy
        self._ready_timeout_s = ready_timeout_s
        self._changed = changed
        self._attempt: RunningServer | None = None  # what this supervisor's restart launched

    @property
    def log_path(self) -> Path:
        return self._log_dir / f"{self._name}.log"

    def check(self) -> WorkloadRecord | None:
        """One look: record an ended server; start a restarting one again when it is due.
        The record as it is after (None: no such workload). A restart blocks until its
        server answers or its start fails."""
        record = self._state.snapshot().named(self._name)
        if record is None or not holds_gpu(record.workload.state):
            return record
        w, server = record.workload, record.server
        if w.state in restarts.UP and server is not None:
            return record if self._processes.alive(server) else self._exited(server)
        if w.state is WorkloadState.RESTARTING:
            if server is not None and server != self._attempt and self._processes.alive(server):
                # launched by a restart whose supervisor went away before it answered
                self._processes.stop(server, STOP_GRACE_S)
            if restarts.due(w, self._now()):
                return self._restart(record)
        return record

    def _exited(self, server: RunningServer) -> WorkloadRecord:
        ended = self._processes.exit_of(server, self.log_path) or ServerExit.unknown(self._now())
        ran_for = ended.at - server.started_at

        def change(r: WorkloadRecord) -> WorkloadRecord:
            if r.server != server or r.workload.state not in restarts.UP:
                return r  # changed meanwhile (stopped, restarted by someone else)
            return evolve(
                r, workload=restarts.server_exited(r.workload, ended, ran_for, self._policy)
            )

        after = self._state.update(self._name, change)
        if after.workload.state is WorkloadState.RESTARTING and after.workload.last_exit == ended:
            self._event(ended.at, f"{exit_words(ended)}; {next_clause(after.workload)}")
        self._changed()
        return after

    def _restart(self, record: WorkloadRecord) -> WorkloadRecord | None:
        relaunch = None if record.server is None else self._processes.relaunch(record.server)
        if relaunch is None:
            what = "no recorded command line of a model server to start again"
            return self._failed(ServerExit.not_started(what, self._now()), what)
        spec = ServerSpec(
            name=self._name,
            model_path=Path(record.model_path),
            config=record.config,
            gpu_uuid=record.workload.gpu_uuid if relaunch.on_card else None,
            log_path=self.log_path,
            split=record.workload.split if relaunch.on_card else (),
        )
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._attempt = None
        began = time.monotonic()
        try:
            started = relaunch.runtime.start(spec, self._ready_timeout_s, launched=self._launched)
        except _NotRestarting:
            return self._state.snapshot().named(self._name)
        except RuntimeFailure as failure:
            return self._failed(self._start_end(failure, began), failure.one_line())
        finally:
            attempt, self._attempt = self._attempt, None
        up = self._now()

        def change(r: WorkloadRecord) -> WorkloadRecord:
            if r.workload.state is not WorkloadState.RESTARTING or r.server != attempt:
                return r
            return evolve(r, server=started, workload=restarts.restarted(r.workload, up))

        after = self._state.update(self._name, change)
        if after.server != started:  # stopped or released meanwhile: it keeps that end
            relaunch.runtime.stop(started, STOP_GRACE_S)
        else:
            self._event(
                up,
                f"restart {after.workload.restarts}: its model server answers again"
                f" (pid {started.pid}, port {started.port})",
            )
        self._changed()
        return after

    def _launched(self, server: RunningServer) -> None:
        """Record a process a restart launched, before it answers; a workload that is no
        longer restarting refuses it (the start then stops it)."""

        def change(r: WorkloadRecord) -> WorkloadRecord:
            if r.workload.state is not WorkloadState.RESTARTING:
                raise _NotRestarting
            return evolve(r, server=server)

        self._state.update(self._name, change)
        self._attempt = server

    def _start_end(self, failure: RuntimeFailure, began: float) -> ServerExit:
        """How a restart that did not come up ended."""
        now = self._now()
        if self._attempt is None:
            return ServerExit.not_started(_shortened(failure.one_line()), now)
        if time.monotonic() - began >= self._ready_timeout_s:
            return ServerExit.not_ready(self._ready_timeout_s, now)
        ended = self._processes.exit_of(self._attempt, self.log_path, starting=True)
        return ended or ServerExit.not_started(_shortened(failure.one_line()), now)

    def _failed(self, ended: ServerExit, why: str) -> WorkloadRecord:
        def change(r: WorkloadRecord) -> WorkloadRecord:
            if r.workload.state is not WorkloadState.RESTARTING:
                return r
            return evolve(r, workload=restarts.start_failed(r.workload, ended, self._policy))

        after = self._state.update(self._name, change)
        if after.workload.state is WorkloadState.RESTARTING:
            self._event(
                ended.at,
                f"restart {after.workload.restarts} failed: {why}; {next_clause(after.workload)}",
            )
        self._changed()
        return after

    def _event(self, at: datetime, text: str) -> None:
        self._state.record_event(Event(at=at, workload=self._name, text=text))


def _shortened(text: str) -> str:
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."
