"""``BatchCommands`` on one machine: a job's files under NODEAU_HOME, its worker a process.

Why it is so: docs/adr/decisions/apps-planes.md (apps/batches/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps.batches.commands import BatchAsk, BatchOutcome, BatchSubmitted, BatchView
from nodeau.apps.batches.lifecycle import finish, start_batch_server
from nodeau.apps.models.actions import Resolved, resolve_model
from nodeau.apps.planes.machine_workloads import reservation_source, workload_view
from nodeau.apps.serving.commands import Refused
from nodeau.apps.serving.model_servers import RunRequest
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.refusals import Refusal
from nodeau.domain.runs import name_problem
from nodeau.domain.workloads import RecoveryMode, WorkloadState, holds_gpu, ps_sentence
from nodeau.ports.batches import MachineJobs
from nodeau.ports.errors import SettingsError
from nodeau.ports.runtime import RuntimeFailure
from nodeau.ports.state import UnknownWorkload

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts

Admit = Callable[[Resolved, RunRequest], "tuple[Admission, bool] | Refusal"]


def submit(
    parts: MachineParts,
    resolved: Resolved,
    ask: BatchAsk,
    admit: Admit,
    clock: Callable[[], datetime],
) -> BatchOutcome:
    """Admit the job, start its model server and its worker."""
    settings = parts.models.settings
    request = RunRequest(
        name=ask.name,
        task=ask.task,
        context_tokens=ask.context_tokens,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=3),
        unproved=ask.unproved,
    )
    decided = admit(resolved, request)
    if isinstance(decided, Refusal):
        return Refused(name=ask.name, refusal=decided)
    admission, simulated = decided
    meta = {
        "name": ask.name,
        "file": ask.source,
        "model": admission.record.workload.model,
        "total": len(ask.requests),
        "bad_lines": len(ask.problems),
    }
    parts.jobs.write(ask.name, ask.requests, ask.problems, meta)
    record = start_batch_server(
        admission,
        simulated=simulated,
        runtime=parts.runtime,
        state=parts.state,
        log_dir=settings.log_dir,
        now=clock,
        starter=parts.starter,
    )
    try:
        parts.jobs.start_worker(ask.name)
    except RuntimeFailure:
        if record.server is not None:
            parts.runtime.stop(record.server, grace_s=10.0)
        finish(parts.state, ask.name, WorkloadState.FAILED, clock())
        raise
    now = clock()
    return BatchSubmitted(
        job=status_of(parts.jobs, record, ask.name, now),
        workload=workload_view(record, now, simulated),
        reserved_bytes=admission.placement.reservation.bytes,
        source=reservation_source(admission),
    )


def status_of(
    jobs: MachineJobs, record: WorkloadRecord | None, name: str, now: datetime
) -> BatchView:
    p = jobs.progress(name)
    model = jobs.meta(name).get("model")
    return BatchView(
        name=name,
        model=str(model) if model is not None else None,
        state=record.workload.state.value if record else "unknown",
        sentence=ps_sentence(record.workload, now) if record else "",
        total=p.total,
        done=p.done,
        failed=p.failed,
        left=p.left,
        bad_lines=p.bad_lines,
        results=jobs.where(name),
    )


def statuses(
    jobs: MachineJobs, records: tuple[WorkloadRecord, ...], name: str | None, now: datetime
) -> tuple[BatchView, ...]:
    """One job's status (UnknownWorkload when there is none), or every job's."""
    if name is not None and not jobs.exists(name):
        raise UnknownWorkload(f"no batch job called {name!r}; nodeau batch status lists them")
    names = jobs.names() if name is None else (name,)
    by_name = {r.workload.name: r for r in records}
    return tuple(status_of(jobs, by_name.get(n), n, now) for n in names)


def stop(parts: MachineParts, name: str, clock: Callable[[], datetime]) -> str:
    """Stop the worker and the model server; free the card; keep the results."""
    parts.jobs.stop_worker(name)
    record = next((r for r in parts.state.snapshot().workloads if r.workload.name == name), None)
    if record is not None and holds_gpu(record.workload.state):
        if record.server is not None:
            parts.runtime.stop(record.server, grace_s=10.0)
        finish(parts.state, name, WorkloadState.STOPPED, clock())
    after = next((r for r in parts.state.snapshot().workloads if r.workload.name == name), None)
    view = status_of(parts.jobs, after, name, clock())
    return (
        f"{name}: {view.state}; {view.done + view.failed} results kept "
        f"({view.results}); its card is free"
    )


@frozen(kw_only=True)
class ThisMachineBatches:
    """``BatchCommands`` where the plane is this machine; ``admit`` is the plane's own
    admission of a batch workload (the same checks and the same ledger as ``run``)."""

    _parts: MachineParts
    _records: Callable[[], tuple[WorkloadRecord, ...]]
    _admit: Admit
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def submit(self, ask: BatchAsk) -> BatchOutcome:
        models = self._parts.models
        resolved = resolve_model(ask.model, models.registry.book(), models.catalog())
        if (problem := name_problem(ask.name)) is not None:
            raise SettingsError(f"--name {problem}")
        return submit(self._parts, resolved, ask, self._admit, self._clock)

    def status(self, name: str | None) -> tuple[BatchView, ...]:
        return statuses(self._parts.jobs, self._records(), name, self._clock())

    def results(self, name: str) -> Iterator[dict[str, object]]:
        self.status(name)  # an unknown job says so
        return iter(self._parts.jobs.results(name))

    def stop(self, name: str) -> str:
        self._permit("stop")
        self.status(name)
        return stop(self._parts, name, self._clock)
