"""GPUService and BatchJob objects as the CLI reads them: what was asked, what was decided.

Decisions recorded here:

* A name is looked up as a GPUService first, then as a BatchJob (on the
  one-machine plane the two kinds share one namespace of names too).
* What the controller decided is read from ``status``: the workload record and
  the admission in Nodeau's JSON form (``adapters/record_json.py``), so the
  CLI prints the same text on both planes. A record that cannot be read is
  shown from the plain status fields rather than failing the whole listing.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.record_json import RecordError, from_plain, unpack
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import Admission, StateError, UnknownWorkload, WorkloadRecord

PLURALS = {WorkloadKind.SERVICE: r.GPUSERVICES, WorkloadKind.BATCH: r.BATCHJOBS}
KIND_NAMES = {WorkloadKind.SERVICE: r.GPUSERVICE_KIND, WorkloadKind.BATCH: r.BATCHJOB_KIND}
MERGE_PATCH = "application/merge-patch+json"


class NotDecided(StateError):
    """The object has no recorded admission (not decided yet, or refused)."""


def custom(api: Any) -> Any:
    """The client for Nodeau's own objects."""
    return client.CustomObjectsApi(api)


def read(api: Any, kind: WorkloadKind, name: str) -> dict[str, Any] | None:
    """One object, or None when there is none by that name."""
    try:
        found: dict[str, Any] = custom(api).get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, PLURALS[kind], name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def find(api: Any, name: str) -> tuple[WorkloadKind, dict[str, Any]]:
    """The GPUService, else the BatchJob, called ``name``; UnknownWorkload when neither."""
    for kind in (WorkloadKind.SERVICE, WorkloadKind.BATCH):
        found = read(api, kind, name)
        if found is not None:
            return kind, found
    raise UnknownWorkload(f"no workload called {name!r} in the cluster; nodeau ps lists them")


def list_all(api: Any) -> list[tuple[WorkloadKind, dict[str, Any]]]:
    """Every GPUService, then every BatchJob, each by creation time then name."""
    out: list[tuple[WorkloadKind, dict[str, Any]]] = []
    for kind, plural in PLURALS.items():
        items = custom(api).list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, plural)[
            "items"
        ]
        items.sort(
            key=lambda o: (o["metadata"].get("creationTimestamp", ""), o["metadata"]["name"])
        )
        out.extend((kind, o) for o in items)
    return out


def delete(api: Any, kind: WorkloadKind, name: str) -> None:
    """Delete an object (its finalizer lets the controller release what it held first)."""
    try:
        custom(api).delete_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, PLURALS[kind], name
        )
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def patch_spec(api: Any, kind: WorkloadKind, name: str, spec: dict[str, Any]) -> None:
    """Merge fields into an object's spec."""
    custom(api).patch_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, PLURALS[kind], name, {"spec": spec},
        _content_type=MERGE_PATCH,
    )  # fmt: skip


def status(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's status (empty before the controller first writes it)."""
    held = obj.get("status")
    return held if isinstance(held, dict) else {}


def record_of(obj: dict[str, Any]) -> WorkloadRecord | None:
    """The workload record in status, or None when there is none or it cannot be read."""
    raw = status(obj).get("record")
    if not raw:
        return None
    try:
        return from_plain(raw, WorkloadRecord, f"{obj['metadata']['name']}'s record")
    except RecordError:
        return None


def admission_of(obj: dict[str, Any]) -> Admission:
    """The admission in status, as ``service explain`` and ``placement explain`` read it."""
    name = obj["metadata"]["name"]
    held = status(obj)
    packed = held.get("admission")
    if isinstance(packed, str) and packed:
        return unpack(packed, Admission, f"{name}'s recorded admission")
    refusal = held.get("refusal")
    if isinstance(refusal, dict):
        raise NotDecided(
            f"{name} was refused ({refusal.get('kind')}): {refusal.get('code')}: "
            f"{refusal.get('message')}; nothing was admitted"
        )
    raise NotDecided(f"{name} has no recorded admission yet: the controller has not decided")


def refusal_line(refusal: dict[str, Any]) -> str:
    """A refusal as ``nodeau run`` prints it."""
    return f"refused ({refusal.get('kind')}): {refusal.get('code')}: {refusal.get('message')}"
