"""What a person asks of a workload on a fleet: which model, for which task, recovering how.

A GPUService's or a BatchJob's spec, read into a value; the controller decides on it.
"""

from __future__ import annotations

from datetime import timedelta

from attrs import frozen

from nodeau.domain.batches import BatchRequest
from nodeau.domain.organisation import Requester
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind


@frozen(kw_only=True)
class WorkloadAsk:
    """What a person asks of a workload: which model, for which task, recovering how."""

    kind: WorkloadKind
    name: str
    model: str
    task: Task = Task.CHAT
    context_tokens: int | None = None
    recovery: RecoveryMode = RecoveryMode.NEVER
    recovery_after: timedelta = timedelta(seconds=180)
    endpoint_stopped: bool = False
    requests: tuple[BatchRequest, ...] = ()  # a batch job's requests, in order
    bad_lines: int = 0  # a batch job's lines that could not run (said at submit)
    # who asked (as the API server named them when the object was created); None: not said
    requester: Requester | None = None
    # a service served for a task its model has not proved, by the asker's explicit choice
    unproved: bool = False
