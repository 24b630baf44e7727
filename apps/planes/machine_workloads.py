"""``nodeau ps`` on one machine: every workload holding a card, as its server is found now,
and any model server of this home that the state does not name.

Why it is so: docs/adr/decisions/apps-planes.md (machine_workloads.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.domain.restarts import as_seen, seen_exited
from nodeau.domain.workloads import (
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
    endpoint_stopped,
    holds_gpu,
    ps_sentence,
    start_interrupted,
)

if TYPE_CHECKING:  # annotations only: this module is what ``ps`` imports
    from nodeau.apps.settings import Settings
    from nodeau.domain.records import Admission, WorkloadRecord
    from nodeau.ports.runtime import HomeServers, ModelRuntime, RunningServer, ServerWatch
    from nodeau.ports.state import StateStore


class WorkloadParts(Protocol):
    """What listing the workloads uses of the machine's adapters."""

    @property
    def state(self) -> StateStore: ...

    @property
    def runtime(self) -> ModelRuntime:
        """The model server that starts workloads (a SettingsError when none is found)."""
        ...

    @property
    def processes(self) -> HomeServers:
        """What stops a recorded model server by its process, whichever runtime made it:
        stopping needs no model server installed."""
        ...

    def endpoint_listens(self, port: int) -> bool:
        """Whether the loopback endpoint on ``port`` accepts connections now; cheap, for
        ``ps`` asks it of every service it lists (no service manager is asked)."""
        ...

    @property
    def watch(self) -> ServerWatch:
        """What ``ps`` asks of this home's processes without building a runtime."""
        ...


def endpoint_url(record: WorkloadRecord) -> str | None:
    """The address a client uses: the loopback endpoint of a service."""
    if record.workload.kind is not WorkloadKind.SERVICE or not record.endpoint_port:
        return None
    return f"http://127.0.0.1:{record.endpoint_port}/v1"


def fronted(record: WorkloadRecord) -> bool:
    """Whether a service in this state has an endpoint in front of it, once one is started:
    loaded or being restarted (its endpoint is what restarts it)."""
    up = (WorkloadState.SERVING, WorkloadState.RESTARTING)
    return endpoint_url(record) is not None and record.workload.state in up


def watched(record: WorkloadRecord) -> bool:
    """Whether ``ps`` looks at this record's server: it serves or runs on one."""
    up = record.workload.state in (WorkloadState.SERVING, WorkloadState.RUNNING)
    return up and record.server is not None


def workload_view(
    record: WorkloadRecord,
    now: datetime,
    simulated: bool,
    shown: Workload | None = None,
    *,
    endpoint_up: bool = True,
) -> WorkloadView:
    """The row of ``record``; ``shown``: the workload as ``ps`` found it, when that differs
    from the record (a server found gone); ``endpoint_up``: False when its endpoint is
    found not listening (then no address is shown, and its sentence says so)."""
    w = record.workload if shown is None else shown
    if not endpoint_up:
        w = endpoint_stopped(w)
    return WorkloadView(
        name=w.name,
        kind=w.kind.value,
        model=w.model,
        machine=w.machine,
        gpu=w.gpu_uuid,
        cards=w.cards,
        simulated=simulated,
        state=w.state.value,
        since=w.since,
        endpoint=endpoint_url(record) if endpoint_up else None,
        sentence=ps_sentence(w, now),
        on_cpu=w.on_cpu,
    )


def unknown_view(name: str, server: RunningServer, machine: str, simulated: bool) -> WorkloadView:
    """The row of a model server of this home that no record names."""
    model = next(
        (server.command[i + 1] for i, a in enumerate(server.command[:-1]) if a == "--model"), ""
    )
    return WorkloadView(
        name=name,
        kind="unknown",
        model=model.rsplit("/", 1)[-1],
        machine=machine,
        gpu=None,
        simulated=simulated,
        state="unknown",
        since=server.started_at,
        endpoint=None,
        sentence=f"a model server of this home (pid {server.pid}, port {server.port}) that the "
        "state does not name: the state was lost or emptied, so which card it holds is "
        f"unknown; nodeau stop {name} --workload ends it",
    )


class MachineWorkloads:
    """The workloads of this machine's home, as ``ps`` shows them."""

    def __init__(
        self, settings: Settings, parts: WorkloadParts, clock: Callable[[], datetime]
    ) -> None:
        self._settings = settings
        self._parts = parts
        self._clock = clock

    @property
    def simulated(self) -> bool:
        return self._settings.simulated_gpus is not None

    def records(self) -> tuple[WorkloadRecord, ...]:
        """Every record of the state (none before a first ``run`` made the state file)."""
        if not self._settings.state_path.exists():
            return ()
        return self._parts.state.snapshot().workloads

    def record(self, name: str) -> WorkloadRecord | None:
        """The record of workload ``name``; None when the state names none."""
        return next((r for r in self.records() if r.workload.name == name), None)

    def views(self) -> tuple[WorkloadView, ...]:
        """Every workload holding a card, then every model server no record names."""
        now = self._clock()
        records = [r for r in self.records() if holds_gpu(r.workload.state)]
        alive = self._alive() if any(watched(r) for r in records) else None
        known = tuple(
            workload_view(
                r, now, self.simulated, self._as_seen(r, now, alive), endpoint_up=self._up(r)
            )
            for r in records
        )
        return known + tuple(
            unknown_view(name, server, self._settings.machine, self.simulated)
            for name, server in self.unknown_servers(records)
        )

    def _up(self, record: WorkloadRecord) -> bool:
        """False for a service whose endpoint should front it and does not listen (stopped,
        or given up); True for every other."""
        if not fronted(record) or record.endpoint_port is None:
            return True
        return self._parts.endpoint_listens(record.endpoint_port)

    def unknown_servers(
        self, records: Sequence[WorkloadRecord] | None = None
    ) -> tuple[tuple[str, RunningServer], ...]:
        """This home's model servers that run although no record holding a card names them
        or their workload: its state file was lost, emptied or replaced. A server of a
        workload that holds its card is that workload's, even in the moment between its
        (re)start's spawn and its record naming the new pid."""
        if not self._parts.watch.any_under(self._settings.models_root):
            return ()  # none runs here (asked without loading any runtime's adapter)
        held = [
            r
            for r in (records if records is not None else self.records())
            if holds_gpu(r.workload.state)
        ]
        pids = {r.server.pid for r in held if r.server is not None}
        names = {r.workload.name for r in held}
        return tuple(
            (name, server)
            for name, server in self._parts.processes.under(self._settings.models_root)
            if server.pid not in pids and name not in names
        )

    def refuse_unknown_servers(self) -> None:
        """A StateError while model servers of this home run that the state does not name:
        which cards they hold cannot be known, so nothing is admitted."""
        from nodeau.ports.state import StateError

        unknown = self.unknown_servers()
        if unknown:
            listed = ", ".join(f"{name} (pid {server.pid})" for name, server in unknown)
            raise StateError(
                f"model servers of this home run that {self._settings.state_path} does not "
                f"name: {listed}; the state was lost or emptied, so which cards they hold is "
                "unknown and nothing is admitted until each is stopped (nodeau stop NAME "
                "--workload)"
            )

    def _as_seen(
        self, record: WorkloadRecord, now: datetime, alive: Callable[[RunningServer], bool] | None
    ) -> Workload:
        """The workload as ``ps`` shows it: exited when its server is found gone."""
        server = record.server
        starting = record.workload.state in (WorkloadState.ADMITTED, WorkloadState.STARTING)
        if (
            starting
            and record.starter is not None
            and not self._parts.watch.starter_alive(record.starter)
        ):
            return start_interrupted(record.workload, server.pid if server else None)
        if alive is None or server is None or not watched(record) or alive(server):
            return as_seen(record.workload, now)
        log = self._settings.log_dir / f"{record.workload.name}.log"
        ended = self._parts.watch.exit_of(server, log) or ServerExit.unknown(now)
        return seen_exited(record.workload, ended)

    def _alive(self) -> Callable[[RunningServer], bool]:
        """Whether a recorded server still runs: the runtime's check when the parts hold a
        runtime already, else the process check every runtime shares. ``ps`` never builds
        a runtime to look (that loads every model server's adapter, and fails where none
        is configured in this shell)."""
        built = not isinstance(getattr(type(self._parts), "runtime", None), cached_property)
        if built or "runtime" in getattr(self._parts, "__dict__", {}):
            return self._parts.runtime.alive
        return self._parts.watch.alive


def reservation_source(admission: Admission) -> str:
    """Whether the reserved figure was estimated or measured, on the card it holds."""
    uuid = admission.placement.gpu_uuid
    gpu_model = next(c.gpu_model for c in admission.admitted.cards if c.gpu_uuid == uuid)
    return admission.admitted.prediction_for(gpu_model).source.value
