"""GPUService and BatchJob objects: found by name, created for an admission, status written.

Decisions recorded here:

* The object's kind follows the workload's: a service is a GPUService, a batch
  job a BatchJob (both in ``nodeau-system``). A name is looked up in both kinds;
  the one that carries a record wins, then GPUService.
* An object Nodeau creates carries finalizer ``nodeau.ai/reservation`` and a spec
  that says what the record says (model, task, context; a service's recovery),
  so it reads like what a person would have applied.
* Status is written whole (status subresource) under the resourceVersion it was
  read at; a 409 reads again and applies the same change again (bounded).
* A condition's lastTransitionTime changes only when its status flips.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from attrs import frozen
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors
from nodeau.adapters.record_json import RecordError, from_plain, pack, to_plain
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Reservation
from nodeau.domain.workloads import FINISHED, WorkloadKind, ps_sentence
from nodeau.ports.state import Admission, StateError, UnknownWorkload, WorkloadRecord

MAX_TRIES = 50  # writes lost to others in a row before giving up (each loss is progress)

PLURALS = {WorkloadKind.SERVICE: r.GPUSERVICES, WorkloadKind.BATCH: r.BATCHJOBS}
KINDS = {WorkloadKind.SERVICE: r.GPUSERVICE_KIND, WorkloadKind.BATCH: r.BATCHJOB_KIND}

Condition = tuple[str, bool, str, str]  # type, status, reason, message
HERE = (r.GROUP, r.VERSION, r.NAMESPACE)


@frozen(kw_only=True)
class WorkloadObject:
    """One GPUService or BatchJob as the API server returned it."""

    kind: WorkloadKind
    body: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def status(self) -> Mapping[str, Any]:
        return self.body.get("status") or {}

    @property
    def generation(self) -> int | None:
        found = self.body["metadata"].get("generation")
        return None if found is None else int(found)

    @property
    def title(self) -> str:
        """How a message names it: ``GPUService nodeau-system/chat``."""
        return f"{KINDS[self.kind]} {r.NAMESPACE}/{self.name}"


def unknown(name: str) -> str:
    """What UnknownWorkload says."""
    return f"no workload called {name} in {r.NAMESPACE}"


def list_objects(api: Any) -> tuple[WorkloadObject, ...]:
    """Every GPUService and BatchJob."""
    custom: Any = client.CustomObjectsApi(api)
    found: list[WorkloadObject] = []
    with api_errors("list GPUServices and BatchJobs"):
        for kind, plural in PLURALS.items():
            listed = custom.list_namespaced_custom_object(
                *HERE, plural, _request_timeout=REQUEST_TIMEOUT
            )
            found.extend(WorkloadObject(kind=kind, body=item) for item in listed["items"])
    return tuple(found)


def get_object(api: Any, kind: WorkloadKind, name: str) -> WorkloadObject | None:
    """The object of this kind and name, or None."""
    custom: Any = client.CustomObjectsApi(api)
    with api_errors(f"read {KINDS[kind]} {name}"):
        try:
            body = custom.get_namespaced_custom_object(
                *HERE, PLURALS[kind], name, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
    return WorkloadObject(kind=kind, body=body)


def find_object(api: Any, name: str) -> WorkloadObject | None:
    """The workload's object of either kind: one holding a card first, then one with a
    record (a name is free again once its workload finished, for either kind)."""
    found = [o for o in (get_object(api, kind, name) for kind in PLURALS) if o is not None]
    found.sort(key=lambda o: ("record" not in o.status, _finished(o)))
    return found[0] if found else None


def _finished(found: WorkloadObject) -> bool:
    state = (found.status.get("record") or {}).get("workload", {}).get("state")
    return state in {s.value for s in FINISHED}


def spec_of(record: WorkloadRecord) -> dict[str, Any]:
    """What a person would have applied to ask for this workload."""
    w = record.workload
    spec: dict[str, Any] = {
        "model": w.model,
        "task": record.config.task.value,
        "contextTokens": record.config.context_tokens,
    }
    if w.kind is WorkloadKind.SERVICE:
        spec["recovery"] = w.recovery_mode.value
        spec["recoveryAfterSeconds"] = min(86400, round(w.recovery_after.total_seconds()))
    return spec


def create_object(api: Any, record: WorkloadRecord) -> WorkloadObject:
    """Create the workload's object (no status yet); the existing one if it appeared meanwhile."""
    kind, name = record.workload.kind, record.workload.name
    body = {
        "apiVersion": r.API_VERSION,
        "kind": KINDS[kind],
        "metadata": {"name": name, "namespace": r.NAMESPACE, "finalizers": [r.FINALIZER]},
        "spec": spec_of(record),
    }
    custom: Any = client.CustomObjectsApi(api)
    try:
        with api_errors(f"create {KINDS[kind]} {name}"):
            created = custom.create_namespaced_custom_object(
                *HERE,
                PLURALS[kind],
                body,
                _request_timeout=REQUEST_TIMEOUT,
            )
    except Conflict:
        existing = get_object(api, kind, name)
        if existing is None:
            raise StateError(f"{KINDS[kind]} {name} was created and deleted meanwhile") from None
        return existing
    return WorkloadObject(kind=kind, body=created)


def write_status(
    api: Any,
    kind: WorkloadKind,
    name: str,
    change: Callable[[WorkloadObject], dict[str, Any]],
    first: WorkloadObject | None = None,
) -> WorkloadObject:
    """Replace the object's status by ``change(object)`` under its resourceVersion.

    ``change`` gets the object as read and returns the whole new status; on a 409
    the object is read again and ``change`` runs again. UnknownWorkload if there
    is no such object.
    """
    custom: Any = client.CustomObjectsApi(api)
    current = first
    for _ in range(MAX_TRIES):
        if current is None:
            current = get_object(api, kind, name)
        if current is None:
            raise UnknownWorkload(unknown(name))
        body = copy.deepcopy(dict(current.body))
        body["status"] = change(current)
        try:
            with api_errors(f"write the status of {current.title}"):
                try:
                    written = custom.replace_namespaced_custom_object_status(
                        *HERE,
                        PLURALS[kind],
                        name,
                        body,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                except ApiException as exc:
                    if exc.status == 404:
                        raise UnknownWorkload(unknown(name)) from exc
                    raise
        except Conflict:
            current = None
            continue
        return WorkloadObject(kind=kind, body=written)
    raise StateError(
        f"cannot write the status of {KINDS[kind]} {name}: it changed under "
        f"{MAX_TRIES} writes in a row"
    )


def record_of(found: WorkloadObject) -> WorkloadRecord:
    """The record in the object's status; StateError naming the object if it does not read."""
    try:
        return from_plain(found.status["record"], WorkloadRecord, f"the record of {found.name}")
    except RecordError as exc:
        raise StateError(f"{found.title}: {exc}") from exc


def record_fields(record: WorkloadRecord, now: datetime) -> dict[str, Any]:
    """The status fields a record decides: itself, its state and sentence, where it is."""
    w = record.workload
    return {
        "record": to_plain(record, WorkloadRecord),
        "state": w.state.value,
        "sentence": ps_sentence(w, now),
        "machine": w.machine,
        "gpuUUID": w.gpu_uuid,
    }


def admitted_status(
    current: WorkloadObject, admission: Admission, now: datetime, identity: str, message: str
) -> dict[str, Any]:
    """The status of an admitted workload: the decision, where, how much, on what figures."""
    reservation = admission.placement.reservation
    card = next(c for c in admission.admitted.cards if c.gpu_uuid == reservation.gpu_uuid)
    status = {k: v for k, v in current.status.items() if k != "refusal"}
    status.update(
        record_fields(admission.record, now),
        admission=pack(admission, Admission),
        reservation=to_plain(reservation, Reservation),
        reservedBytes=reservation.bytes,
        source=admission.admitted.prediction_for(card.gpu_model).source.value,
        decidedBy=identity,
        decidedAt=admission.decided_at.isoformat(),
        observedGeneration=current.generation,
    )
    placed = (
        ("Admitted", True, "Admitted", message),
        ("Placed", True, "Placed", admission.placement.why),
    )
    status["conditions"] = with_conditions(status, placed, now, current.generation)
    return status


def refused_status(current: WorkloadObject, refusal: Refusal, at: datetime) -> dict[str, Any]:
    """The status of a workload admission said no to: which kind of no, and why."""
    status = {
        **current.status,
        "state": "refused",
        "sentence": refusal.sentence,
        "refusal": {
            "kind": refusal.kind.value,
            "code": refusal.code.value,
            "message": refusal.sentence,
        },
    }
    said = f"{refusal.code.value}: {refusal.sentence}"
    refused = (("Admitted", False, refusal.kind.value.capitalize(), said),)
    status["conditions"] = with_conditions(status, refused, at, current.generation)
    return status


def released_status(
    current: WorkloadObject, record: WorkloadRecord, now: datetime, freed: str | None
) -> dict[str, Any]:
    """The status of a finished workload; ``freed`` says which card it gave back, if any."""
    status = {**current.status, **record_fields(record, now)}
    if freed is not None:
        status["reservedBytes"] = 0
        gone = (("Placed", False, "Released", freed),)
        status["conditions"] = with_conditions(status, gone, now, current.generation)
    return status


def with_conditions(
    status: Mapping[str, Any],
    conditions: Sequence[Condition],
    now: datetime,
    generation: int | None,
) -> list[dict[str, Any]]:
    """The status's conditions with these set; each keeps its lastTransitionTime unless
    its status flips."""
    merged = [dict(c) for c in status.get("conditions") or ()]
    for type_, ok, reason, message in conditions:
        wanted = "True" if ok else "False"
        old = next((c for c in merged if c.get("type") == type_), None)
        since = old["lastTransitionTime"] if old and old.get("status") == wanted else stamp(now)
        new: dict[str, Any] = {
            "type": type_,
            "status": wanted,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        if generation is not None:
            new["observedGeneration"] = generation
        if old is None:
            merged.append(new)
        else:
            merged[merged.index(old)] = new
    return merged


def stamp(at: datetime) -> str:
    """A moment as Kubernetes writes one (RFC 3339, UTC, seconds)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
