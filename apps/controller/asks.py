"""What a GPUService or BatchJob asks for: its spec, read into one value.

The API server has already checked the spec against the CRD's schema and
filled its defaults, so reading it only names the fields; a field the schema
would have refused is a programming error here, not a refusal. Decisions
recorded here:

* ``recoveryAfterSeconds`` 0 (the schema allows it) means "as soon as the
  machine counts as unreachable": one second, since the domain needs a positive
  delay.
* A batch job never recovers (the domain's rule), whatever its spec says.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from attrs import frozen

from nodeau.adapters.kube import resources as r
from nodeau.apps.serving import RunRequest
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode, WorkloadKind

KINDS = {r.GPUSERVICE_KIND: WorkloadKind.SERVICE, r.BATCHJOB_KIND: WorkloadKind.BATCH}
PLURALS = {WorkloadKind.SERVICE: r.GPUSERVICES, WorkloadKind.BATCH: r.BATCHJOBS}
KIND_NAMES = {WorkloadKind.SERVICE: r.GPUSERVICE_KIND, WorkloadKind.BATCH: r.BATCHJOB_KIND}
DEFAULT_RECOVERY_AFTER_S = 180


@frozen(kw_only=True)
class Ask:
    """One object's request: which model, for which task, at what context, recovering how."""

    kind: WorkloadKind
    name: str
    uid: str
    model: str
    task: Task
    context_tokens: int | None
    recovery: RecoveryMode
    recovery_after: timedelta
    endpoint_stopped: bool

    def run_request(self) -> RunRequest:
        """The same request in the shape the one-machine plane decides on."""
        return RunRequest(
            name=self.name,
            task=self.task,
            context_tokens=self.context_tokens,
            recovery=self.recovery,
            recovery_after=self.recovery_after,
        )


def ask_of(kind: WorkloadKind, obj: Mapping[str, Any]) -> Ask:
    """Read a GPUService's or BatchJob's spec (as the API server returns it)."""
    meta = obj["metadata"]
    spec: Mapping[str, Any] = obj.get("spec") or {}
    service = kind is WorkloadKind.SERVICE
    after_s = int(spec.get("recoveryAfterSeconds", DEFAULT_RECOVERY_AFTER_S))
    context = spec.get("contextTokens")
    return Ask(
        kind=kind,
        name=str(meta["name"]),
        uid=str(meta.get("uid", "")),
        model=str(spec["model"]),
        task=Task(spec.get("task", Task.CHAT.value)),
        context_tokens=None if context is None else int(context),
        recovery=RecoveryMode(spec.get("recovery", "never")) if service else RecoveryMode.NEVER,
        recovery_after=timedelta(seconds=max(1, after_s)),
        endpoint_stopped=service and spec.get("endpoint", "serving") == "stopped",
    )
