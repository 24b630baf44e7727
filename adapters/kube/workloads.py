"""``ports.workload_objects.WorkloadObjects`` on GPUServices and BatchJobs in ``nodeau-system``.

Why it is so: docs/adr/decisions/adapters-kube.md (workloads.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors, or_none
from nodeau.adapters.kube.informer_cache import KnownObjects, version_of
from nodeau.adapters.kube.objects import (
    HERE,
    KINDS,
    PLURALS,
    KubeObject,
    get_object,
    refused_status,
    unknown,
    view,
    with_conditions,
    write_status,
)
from nodeau.adapters.record_json import unpack
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.records import Admission
from nodeau.domain.refusals import Refusal
from nodeau.domain.workloads import RecoveryMode, WorkloadKind
from nodeau.ports.state import UnknownWorkload
from nodeau.ports.workload_objects import Condition, WorkloadObject, check_status_fields

MERGE_PATCH = "application/merge-patch+json"


def spec_of_ask(ask: WorkloadAsk) -> dict[str, Any]:
    """The spec a person applies for this ask."""
    spec: dict[str, Any] = {"model": ask.model, "task": ask.task.value}
    if ask.kind is WorkloadKind.SERVICE:
        spec["recovery"] = ask.recovery.value
        spec["recoveryAfterSeconds"] = int(ask.recovery_after.total_seconds())
        spec["endpoint"] = "stopped" if ask.endpoint_stopped else "serving"
    if ask.unproved:
        spec["unproved"] = True
    if ask.kind is WorkloadKind.BATCH and ask.requests:
        spec["requests"] = [
            {"custom_id": q.custom_id, "method": "POST", "url": q.url, "body": dict(q.body)}
            for q in ask.requests
        ]
    if ask.kind is WorkloadKind.BATCH and ask.bad_lines:
        spec["badLines"] = ask.bad_lines
    if ask.context_tokens is not None:
        spec["contextTokens"] = ask.context_tokens
    if ask.requester is not None:
        spec["requester"] = {
            "user": ask.requester.user,
            "groups": sorted(ask.requester.groups),
        }
    return spec


class KubeWorkloadObjects:
    """GPUServices and BatchJobs through the API server (``identity`` signs the Events;
    ``known``: the controller's cache of them, read instead of the API server where it
    knows, kept from every answer; None: every read asks)."""

    def __init__(
        self, api: Any, *, identity: str = "nodeau", known: KnownObjects | None = None
    ) -> None:
        self._api = api
        self._identity = identity
        self._known = known
        self._custom: Any = client.CustomObjectsApi(api)

    def list_all(self) -> tuple[WorkloadObject, ...]:
        out: list[WorkloadObject] = []
        for kind, plural in PLURALS.items():
            with api_errors(f"list {plural}"):
                listed = self._custom.list_namespaced_custom_object(
                    *HERE, plural, _request_timeout=REQUEST_TIMEOUT
                )
            items = listed["items"]
            if self._known is not None:
                self._known.listed(plural, items, version_of(listed))
            items.sort(
                key=lambda o: (o["metadata"].get("creationTimestamp", ""), o["metadata"]["name"])
            )
            out.extend(view(KubeObject(kind=kind, body=o)) for o in items)
        return tuple(out)

    def get(self, kind: WorkloadKind, name: str) -> WorkloadObject | None:
        found = get_object(self._api, kind, name, self._known)
        return None if found is None else view(found)

    def admission(self, obj: WorkloadObject) -> Admission | None:
        packed = obj.packed_admission
        if packed is None:
            return None
        return unpack(packed, Admission, f"{obj.name}'s recorded admission")

    def find(self, name: str) -> WorkloadObject | None:
        for kind in (WorkloadKind.SERVICE, WorkloadKind.BATCH):
            found = self.get(kind, name)
            if found is not None:
                return found
        return None

    def create(self, ask: WorkloadAsk) -> bool:
        self._changing(ask.kind, ask.name)
        body = {
            "apiVersion": r.API_VERSION,
            "kind": KINDS[ask.kind],
            "metadata": {"name": ask.name, "namespace": r.NAMESPACE},
            "spec": spec_of_ask(ask),
        }
        try:
            with api_errors(f"create {KINDS[ask.kind]} {ask.name}"):
                self._custom.create_namespaced_custom_object(
                    *HERE, PLURALS[ask.kind], body, _request_timeout=REQUEST_TIMEOUT
                )
        except Conflict:
            return False
        return True

    def want_endpoint(self, kind: WorkloadKind, name: str, serving: bool) -> None:
        self._changing(kind, name)
        patch = {"spec": {"endpoint": "serving" if serving else "stopped"}}
        done = or_none(
            f"change the spec of {KINDS[kind]} {name}",
            lambda: self._custom.patch_namespaced_custom_object(
                *HERE, PLURALS[kind], name, patch,
                _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT,
            ),
        )  # fmt: skip
        if done is None:
            raise UnknownWorkload(unknown(name))

    def set_recovery(
        self, kind: WorkloadKind, name: str, mode: RecoveryMode, after: timedelta
    ) -> None:
        if kind is not WorkloadKind.SERVICE:
            raise ValueError(f"recovery applies to served workloads; {name} is a batch job")
        self._changing(kind, name)
        seconds = int(after.total_seconds())
        patch = {"spec": {"recovery": mode.value, "recoveryAfterSeconds": seconds}}
        done = or_none(
            f"change the recovery of {KINDS[kind]} {name}",
            lambda: self._custom.patch_namespaced_custom_object(
                *HERE, PLURALS[kind], name, patch,
                _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT,
            ),
        )  # fmt: skip
        if done is None:
            raise UnknownWorkload(unknown(name))

    def delete(self, kind: WorkloadKind, name: str) -> None:
        self._changing(kind, name)
        or_none(
            f"delete {KINDS[kind]} {name}",
            lambda: self._custom.delete_namespaced_custom_object(
                *HERE, PLURALS[kind], name, _request_timeout=REQUEST_TIMEOUT
            ),
        )

    def guard(self, obj: WorkloadObject) -> bool:
        current = self._finalizers(obj)
        if current is None:
            return False
        if r.FINALIZER in current:
            return True
        return self._set_finalizers(obj, [*current, r.FINALIZER])

    def unguard(self, obj: WorkloadObject) -> bool:
        current = self._finalizers(obj)
        if current is None:
            return False
        if r.FINALIZER not in current:
            return True
        return self._set_finalizers(obj, [f for f in current if f != r.FINALIZER])

    def set_status(
        self,
        kind: WorkloadKind,
        name: str,
        fields: Mapping[str, Any],
        conditions: Sequence[Condition],
        at: datetime,
    ) -> None:
        check_status_fields(fields)

        def apply(current: KubeObject) -> dict[str, Any]:
            status = {**current.status, **fields}
            status = {k: v for k, v in status.items() if v is not None}
            if conditions:
                status["conditions"] = with_conditions(status, conditions, at, current.generation)
            return status

        write_status(self._api, kind, name, apply, known=self._known)

    def record_refusal(self, kind: WorkloadKind, name: str, refusal: Refusal, at: datetime) -> None:
        written = write_status(
            self._api,
            kind,
            name,
            lambda current: refused_status(current, refusal, at),
            known=self._known,
        )
        events.record(
            self._api,
            workload=name,
            involved=written,
            reason="Refused",
            message=f"{refusal.code.value}: {refusal.sentence}",
            at=at,
            identity=self._identity,
            warning=True,
        )

    # -- plumbing

    def _changing(self, kind: WorkloadKind, name: str) -> None:
        """A write whose answer is not kept: the next read of the object asks."""
        if self._known is not None:
            self._known.forget(PLURALS[kind], name)

    def _finalizers(self, obj: WorkloadObject) -> list[str] | None:
        """The object's finalizers (others' too) at the version read; None when it changed
        or went since (its watch event brings it back)."""
        found = get_object(self._api, obj.kind, obj.name, self._known)
        if found is None or found.version != obj.version:
            return None
        return list(found.body["metadata"].get("finalizers") or [])

    def _set_finalizers(self, obj: WorkloadObject, finalizers: list[str]) -> bool:
        """Replace the finalizers under the version read; False when it changed or went."""
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": obj.version}}
        try:
            done = or_none(
                f"set the finalizers of {obj.title}",
                lambda: self._custom.patch_namespaced_custom_object(
                    *HERE, PLURALS[obj.kind], obj.name, patch, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        except Conflict:
            if self._known is not None:
                self._known.forget(PLURALS[obj.kind], obj.name)
            return False  # it changed since it was read: its watch event brings it back
        if self._known is not None:
            if done is None:
                self._known.gone(PLURALS[obj.kind], obj.name)
            else:
                self._known.seen(PLURALS[obj.kind], done)
        return done is not None
