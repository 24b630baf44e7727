"""GPUService and BatchJob objects: found by name, created for an admission, status written.

Why it is so: docs/adr/decisions/adapters-kube.md (objects.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from attrs import frozen
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors, or_none, send_json
from nodeau.adapters.kube.informer_cache import UNKNOWN, KnownObjects, version_of
from nodeau.adapters.record_json import RecordError, from_plain, pack, to_plain
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.batches import BatchRequest
from nodeau.domain.organisation import Requester
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Reservation
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import FINISHED, RecoveryMode, WorkloadKind, ps_sentence
from nodeau.ports.state import Admission, StateError, UnknownWorkload, WorkloadRecord
from nodeau.ports.workload_objects import Condition, WorkloadObject

MAX_TRIES = 50  # writes lost to others in a row before giving up (each loss is progress)

PLURALS = {WorkloadKind.SERVICE: r.GPUSERVICES, WorkloadKind.BATCH: r.BATCHJOBS}
KINDS = {WorkloadKind.SERVICE: r.GPUSERVICE_KIND, WorkloadKind.BATCH: r.BATCHJOB_KIND}

HERE = (r.GROUP, r.VERSION, r.NAMESPACE)
STATUS = "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status"
DEFAULT_RECOVERY_AFTER_S = 180


@frozen(kw_only=True)
class KubeObject:
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

    @property
    def uid(self) -> str:
        return str(self.body["metadata"].get("uid", ""))

    @property
    def version(self) -> str:
        return str(self.body["metadata"].get("resourceVersion", ""))


def ask_of(kind: WorkloadKind, body: Mapping[str, Any]) -> WorkloadAsk:
    """Read a GPUService's or BatchJob's spec (as the API server returns it, defaults filled).

    ``recoveryAfterSeconds`` 0 (the schema allows it) means "as soon as the machine
    counts as unreachable": one second, since the domain needs a positive delay. A
    batch job never recovers (the domain's rule), whatever its spec says.
    """
    spec: Mapping[str, Any] = body.get("spec") or {}
    service = kind is WorkloadKind.SERVICE
    after_s = int(spec.get("recoveryAfterSeconds", DEFAULT_RECOVERY_AFTER_S))
    context = spec.get("contextTokens")
    asker = spec.get("requester")
    return WorkloadAsk(
        kind=kind,
        name=str(body["metadata"]["name"]),
        model=str(spec["model"]),
        task=Task(spec.get("task", Task.CHAT.value)),
        context_tokens=None if context is None else int(context),
        recovery=RecoveryMode(spec.get("recovery", "never")) if service else RecoveryMode.NEVER,
        recovery_after=timedelta(seconds=max(1, after_s)),
        endpoint_stopped=service and spec.get("endpoint", "serving") == "stopped",
        requests=tuple(
            BatchRequest(
                line_no=i, custom_id=str(q["custom_id"]), url=str(q["url"]), body=q["body"]
            )
            for i, q in enumerate(spec.get("requests") or (), start=1)
        ),
        requester=None
        if asker is None
        else Requester(
            user=str(asker["user"]), groups=frozenset(map(str, asker.get("groups", ())))
        ),
        unproved=spec.get("unproved") is True,
    )


def view(found: KubeObject) -> WorkloadObject:
    """The port's value of an object: its ask and record read (None when they do not)."""
    meta = found.body["metadata"]
    try:
        ask: WorkloadAsk | None = ask_of(found.kind, found.body)
    except (KeyError, TypeError, ValueError):  # a spec the schema would have refused
        ask = None
    raw = found.status.get("record")
    try:
        record = from_plain(raw, WorkloadRecord, found.name) if raw else None
    except RecordError:
        record = None
    return WorkloadObject(
        kind=found.kind,
        name=found.name,
        title=found.title,
        uid=found.uid,
        version=found.version,
        generation=found.generation,
        ask=ask,
        record=record,
        spec=found.body.get("spec") or {},
        status=found.status,
        guarded=r.FINALIZER in (meta.get("finalizers") or ()),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def unknown(name: str) -> str:
    """What UnknownWorkload says."""
    return f"no workload called {name} in {r.NAMESPACE}"


def list_objects(api: Any, known: KnownObjects | None = None) -> tuple[KubeObject, ...]:
    """Every GPUService and BatchJob (each kind kept complete in ``known``)."""
    custom: Any = client.CustomObjectsApi(api)
    found: list[KubeObject] = []
    with api_errors("list GPUServices and BatchJobs"):
        for kind, plural in PLURALS.items():
            listed = custom.list_namespaced_custom_object(
                *HERE, plural, _request_timeout=REQUEST_TIMEOUT
            )
            if known is not None:
                known.listed(plural, listed["items"], version_of(listed))
            found.extend(KubeObject(kind=kind, body=item) for item in listed["items"])
    return tuple(found)


def get_object(
    api: Any, kind: WorkloadKind, name: str, known: KnownObjects | None = None
) -> KubeObject | None:
    """The object of this kind and name, or None (as ``known`` knows it, when it does)."""
    plural = PLURALS[kind]
    if known is not None and (kept := known.lookup(plural, name)) is not UNKNOWN:
        return None if kept is None else KubeObject(kind=kind, body=kept)
    custom: Any = client.CustomObjectsApi(api)
    body = or_none(
        f"read {KINDS[kind]} {name}",
        lambda: custom.get_namespaced_custom_object(
            *HERE, plural, name, _request_timeout=REQUEST_TIMEOUT
        ),
    )
    if known is not None:
        if body is None:
            known.gone(plural, name)
        else:
            known.seen(plural, body)
    return None if body is None else KubeObject(kind=kind, body=body)


def find_object(api: Any, name: str, known: KnownObjects | None = None) -> KubeObject | None:
    """The workload's object of either kind: one holding a card first, then one with a
    record (a name is free again once its workload finished, for either kind)."""
    found = [o for o in (get_object(api, k, name, known) for k in PLURALS) if o is not None]
    found.sort(key=lambda o: ("record" not in o.status, _finished(o)))
    return found[0] if found else None


def _finished(found: KubeObject) -> bool:
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


def create_object(
    api: Any, record: WorkloadRecord, known: KnownObjects | None = None
) -> KubeObject:
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
        if known is not None:
            known.forget(PLURALS[kind], name)
        existing = get_object(api, kind, name, known)
        if existing is None:
            raise StateError(f"{KINDS[kind]} {name} was created and deleted meanwhile") from None
        return existing
    if known is not None:
        known.seen(PLURALS[kind], created)
    return KubeObject(kind=kind, body=created)


def write_status(
    api: Any,
    kind: WorkloadKind,
    name: str,
    change: Callable[[KubeObject], dict[str, Any]],
    first: KubeObject | None = None,
    known: KnownObjects | None = None,
) -> KubeObject:
    """Replace the object's status by ``change(object)`` under its resourceVersion.

    ``change`` gets the object as read (``first``, else as ``known`` knows it, else from
    the API server) and returns the whole new status; on a 409 the object is read again
    from the API server and ``change`` runs again. UnknownWorkload if there is no such
    object.
    """
    plural = PLURALS[kind]
    current = first
    for _ in range(MAX_TRIES):
        if current is None:
            current = get_object(api, kind, name, known)
        if current is None:
            raise UnknownWorkload(unknown(name))
        body = {**current.body, "status": change(current)}  # the rest is sent as read
        where = {**r.CUSTOM_PATH, "plural": plural, "name": name}
        try:  # plain JSON: the typed method's models cost more than the write
            written = or_none(
                f"write the status of {current.title}",
                partial(send_json, api, "PUT", STATUS, where, body),
            )
        except Conflict:
            current = None
            if known is not None:
                known.forget(plural, name)
            continue
        if known is not None:
            if written is None:
                known.gone(plural, name)
            else:
                known.seen(plural, written)
        if written is None:
            raise UnknownWorkload(unknown(name))
        return KubeObject(kind=kind, body=written)
    raise StateError(
        f"cannot write the status of {KINDS[kind]} {name}: it changed under "
        f"{MAX_TRIES} writes in a row"
    )


def record_of(found: KubeObject) -> WorkloadRecord:
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
    current: KubeObject, admission: Admission, now: datetime, identity: str, message: str
) -> dict[str, Any]:
    """The status of an admitted workload: the decision, where, how much, on what figures."""
    reservation = admission.placement.reservation
    card = next(c for c in admission.admitted.cards if c.gpu_uuid == reservation.gpu_uuid)
    more = admission.placement.more
    status = {k: v for k, v in current.status.items() if k not in ("refusal", "moreReservations")}
    if more:  # a split: every further card's reservation, in the split's order
        status["moreReservations"] = [to_plain(x, Reservation) for x in more]
    status.update(
        record_fields(admission.record, now),
        admission=pack(admission, Admission),
        reservation=to_plain(reservation, Reservation),
        reservedBytes=sum(x.bytes for x in admission.placement.reservations),
        source=admission.admitted.prediction_for(card.gpu_model).source.value,
        decidedBy=identity,
        decidedAt=admission.decided_at.isoformat(),
        observedGeneration=current.generation,
    )
    placed = (
        Condition(type="Admitted", ok=True, reason="Admitted", message=message),
        Condition(type="Placed", ok=True, reason="Placed", message=admission.placement.why),
    )
    status["conditions"] = with_conditions(status, placed, now, current.generation)
    return status


def refused_status(current: KubeObject, refusal: Refusal, at: datetime) -> dict[str, Any]:
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
    refused = (
        Condition(type="Admitted", ok=False, reason=refusal.kind.value.capitalize(), message=said),
    )
    status["conditions"] = with_conditions(status, refused, at, current.generation)
    return status


def released_status(
    current: KubeObject, record: WorkloadRecord, now: datetime, freed: str | None
) -> dict[str, Any]:
    """The status of a finished workload; ``freed`` says which card it gave back, if any."""
    status = {**current.status, **record_fields(record, now)}
    if freed is not None:
        status["reservedBytes"] = 0
        gone = (Condition(type="Placed", ok=False, reason="Released", message=freed),)
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
    for condition in conditions:
        wanted = "True" if condition.ok else "False"
        old = next((c for c in merged if c.get("type") == condition.type), None)
        since = old["lastTransitionTime"] if old and old.get("status") == wanted else stamp(now)
        new: dict[str, Any] = {
            "type": condition.type,
            "status": wanted,
            "reason": condition.reason,
            "message": condition.message,
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
