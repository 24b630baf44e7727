"""``BatchCommands`` on a fleet: a BatchJob asks, the controller decides and runs the job.

Its results are kept by the worker in the cluster (``FleetBatches``) as they are written;
stopping asks the controller and waits, bounded, for the job to end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from attrs import frozen

from nodeau.apps.batches.commands import BatchAsk, BatchOutcome, BatchSubmitted, BatchView
from nodeau.apps.planes.fleet_workloads import workload_view
from nodeau.apps.serving.commands import Refused, Undecided
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.batches import batch_counts, result_from_line
from nodeau.domain.organisation import Requester
from nodeau.domain.runs import name_problem
from nodeau.domain.workloads import WorkloadKind, holds_gpu
from nodeau.ports.batches import FleetBatches
from nodeau.ports.errors import SettingsError
from nodeau.ports.state import StateError, UnknownWorkload
from nodeau.ports.workload_objects import WorkloadObject, WorkloadObjects

POLL_S = 0.2
STOP_WAIT_S = 30.0  # how long ``batch stop`` waits for the controller to end the job
DECIDE_WAIT_S = 60.0  # how long ``batch submit`` waits for the controller's decision

Decision = Callable[[WorkloadKind, str, float], "WorkloadObject | Refused | Undecided"]


def ended(obj: WorkloadObject) -> bool:
    """Whether a workload holds no card any more: finished, or refused."""
    if obj.refusal is not None:
        return True
    return obj.record is not None and not holds_gpu(obj.record.workload.state)


@frozen(kw_only=True)
class FleetBatchJobs:
    """``BatchCommands`` where the plane is a fleet; ``decision`` waits for the controller's
    decision on an object, as ``run`` does."""

    _objects: WorkloadObjects
    _results: Callable[[], FleetBatches]  # the port; raises when this connection has none
    _requester: Callable[[], Requester | None]
    _decision: Decision
    _clock: Callable[[], datetime]
    _permit: Callable[[str], None]

    def submit(self, ask: BatchAsk) -> BatchOutcome:
        if (problem := name_problem(ask.name)) is not None:
            raise SettingsError(f"--name {problem}")
        wanted = WorkloadAsk(
            kind=WorkloadKind.BATCH,
            name=ask.name,
            model=ask.model,
            task=ask.task,
            context_tokens=ask.context_tokens,
            requests=ask.requests,
            bad_lines=len(ask.problems),
            requester=self._requester(),
            unproved=ask.unproved,
        )
        if not self._objects.create(wanted):
            raise StateError(
                f"a batch job called {ask.name} already exists; give another --name "
                f"or stop it with nodeau batch stop {ask.name}"
            )
        decision = self._decision(WorkloadKind.BATCH, ask.name, DECIDE_WAIT_S)
        if not isinstance(decision, WorkloadObject):
            return decision
        return BatchSubmitted(
            job=self._view(decision),
            workload=workload_view(decision, self._clock()),
            reserved_bytes=decision.reserved_bytes or 0,
            source=decision.source,
        )

    def status(self, name: str | None) -> tuple[BatchView, ...]:
        return tuple(self._view(o) for o in self._jobs(name))

    def results(self, name: str) -> Iterator[dict[str, Any]]:
        self._jobs(name)
        yield from self._results().lines(name)

    def stop(self, name: str) -> str:
        """Ask the controller to end the job (``spec.stop``), wait for it (bounded), and say
        what one machine says: its state, the results kept, its card free."""
        self._permit("stop")
        [obj] = self._jobs(name)
        if not ended(obj):
            self._results().ask_stop(name)
            deadline = time.monotonic() + STOP_WAIT_S
            while not ended(obj) and time.monotonic() < deadline:
                time.sleep(POLL_S)
                found = self._objects.get(WorkloadKind.BATCH, name)
                if found is None:
                    raise UnknownWorkload(f"{name} was deleted meanwhile")
                obj = found
        view = self._view(obj)
        kept = f"{view.done + view.failed} results kept ({view.results})"
        if not ended(obj):
            return (
                f"{name}: asked to stop; {kept}; the controller did not end it within "
                f"{STOP_WAIT_S:g} s: it stops its model server and frees its card when it acts"
            )
        return f"{name}: {view.state}; {kept}; its card is free"

    def _view(self, obj: WorkloadObject) -> BatchView:
        view = workload_view(obj, self._clock())
        requests = () if obj.ask is None else obj.ask.requests
        results = self._results()
        kept = (result_from_line(line) for line in results.lines(obj.name))
        counts = batch_counts(requests, (r for r in kept if r is not None))
        bad = obj.spec.get("badLines")
        return BatchView(
            name=obj.name,
            model=view.model,
            state=view.state,
            sentence=view.sentence,
            total=counts.total,
            done=counts.done,
            failed=counts.failed,
            left=counts.left,
            bad_lines=bad if isinstance(bad, int) else 0,
            results=results.where(obj.name),
        )

    def _jobs(self, name: str | None) -> list[WorkloadObject]:
        listed = [o for o in self._objects.list_all() if o.kind is WorkloadKind.BATCH]
        if name is not None:
            listed = [o for o in listed if o.name == name]
            if not listed:
                raise UnknownWorkload(
                    f"no batch job called {name!r}; nodeau batch status lists them"
                )
        return listed
