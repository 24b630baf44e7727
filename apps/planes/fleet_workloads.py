"""A fleet's workload objects as ``ps`` shows them, and finding one by name.

The record's ``ps`` sentence once the controller decided; the refusal, or what the object
says, before.
"""

from __future__ import annotations

from datetime import datetime

from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.domain.workloads import endpoint_stopped, ps_sentence
from nodeau.ports.state import UnknownWorkload
from nodeau.ports.workload_objects import WorkloadObject, WorkloadObjects

PENDING = "pending"
UNDECIDED = "waiting for the controller's decision"


def workload_view(obj: WorkloadObject, now: datetime) -> WorkloadView:
    """An object as ``ps`` shows it: the record's sentence once decided."""
    refusal = obj.refusal
    if obj.record is not None:
        w = obj.record.workload
        sentence = ps_sentence(endpoint_stopped(w) if endpoint_off(obj) else w, now)
    elif refusal is not None:
        sentence = f"refused ({refusal.kind.value}): {refusal.code.value}: {refusal.sentence}"
    else:
        sentence = obj.sentence or UNDECIDED
    gpu = obj.gpu_uuid
    return WorkloadView(
        name=obj.name,
        kind=obj.kind.value,
        model=str(obj.spec.get("model", "")),
        machine=obj.machine,
        gpu=gpu,
        cards=obj.record.workload.cards
        if obj.record is not None
        else (() if gpu is None else (gpu,)),
        simulated=gpu is not None and gpu.startswith("SIM-GPU"),
        state=obj.state or PENDING,
        since=None if obj.record is None else obj.record.workload.since,
        endpoint=None if endpoint_off(obj) else obj.endpoint or None,
        sentence=sentence,
    )


def endpoint_off(obj: WorkloadObject) -> bool:
    """Whether a person stopped the service's endpoint (``spec.endpoint: stopped``)."""
    return obj.ask is not None and obj.ask.endpoint_stopped


def find_workload(objects: WorkloadObjects, name: str) -> WorkloadObject:
    """The GPUService or BatchJob called ``name``; UnknownWorkload when there is none."""
    found = objects.find(name)
    if found is None:
        raise UnknownWorkload(f"no workload called {name!r} in the cluster; nodeau ps lists them")
    return found
