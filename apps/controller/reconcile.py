"""The reconcile of one GPUService or BatchJob: decide once, then drive its Pod and its state.

Every step reads the object fresh and does the one thing its state calls for,
so running a step twice, or two controllers running it at once, changes
nothing more than running it once. Decisions recorded here:

* The finalizer goes on before anything is decided, so deleting an object
  can never leave a reservation behind.
* Not yet decided: ``decide`` runs inside ``KubeStateStore.admit`` (the ledger
  write is the serialisation point); a refusal is recorded and nothing else is
  created. A refused object stays refused (no retries, as on one machine).
* Admitted: the Pod is created (AlreadyExists is fine), then the state moves
  to starting. A Pod Ready with an address: serving (service) or running
  (batch job), the endpoint in status. ``spec.endpoint: stopped`` takes the
  endpoint off and leaves the model loaded.
* Deleted: the Pod is deleted, and the card released only once the Pod is
  gone, so a new workload never meets a server still leaving its card.
* A batch job's Pod that ended releases the card, succeeded or failed.
* A held workload (its machine stopped answering) gets no Pod made for it:
  what happens to it is recovery's decision, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import datetime
from typing import Any

from attrs import evolve, frozen
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from returns.pipeline import is_successful

from nodeau.adapters.kube import events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict, api_errors
from nodeau.adapters.kube.marks import FleetMarks
from nodeau.adapters.kube.objects import WorkloadObject, get_object
from nodeau.adapters.kube.pods import PodView, create_pod, delete_pod, pod_manifest, read_pod
from nodeau.adapters.kube.report_form import MachineReport
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.record_json import RecordError, from_plain
from nodeau.apps.controller.asks import PLURALS, ask_of
from nodeau.apps.controller.decide import decider
from nodeau.domain.health import MachineHealth
from nodeau.domain.workloads import WorkloadKind, WorkloadState, holds_gpu, short_gpu
from nodeau.ports.state import UnknownWorkload, WorkloadRecord

REFUSED = "refused"
STARTED_STATES = frozenset({WorkloadState.ADMITTED, WorkloadState.STARTING})
NO_POD_STATES = frozenset({WorkloadState.HELD, WorkloadState.RECOVERING})


@frozen(kw_only=True)
class FleetInputs:
    """What a decision reads about the fleet, read once for a batch of reconciles."""

    reports: tuple[MachineReport, ...]
    marks: FleetMarks
    health: Mapping[str, MachineHealth]


def endpoint_of(pod: PodView) -> str:
    """The OpenAI-compatible address of a serving Pod."""
    return f"http://{pod.pod_ip}:{r.SERVER_PORT}/v1"


def record_of(obj: WorkloadObject) -> WorkloadRecord | None:
    """The workload record the object's status carries, if it was admitted."""
    raw = obj.status.get("record")
    if not raw:
        return None
    try:
        return from_plain(raw, WorkloadRecord, f"the record of {obj.title}")
    except RecordError:
        return None


def with_state(record: WorkloadRecord, state: WorkloadState, at: datetime) -> WorkloadRecord:
    """The record in ``state`` since ``at`` (a held reason or target is dropped)."""
    w = evolve(record.workload, state=state, since=at, held_reason=None, target_machine=None)
    return evolve(record, workload=w)


class Reconciler:
    """Reconciles objects against the cluster through the store, the Pods and Events."""

    def __init__(
        self,
        api: Any,
        store: KubeStateStore,
        *,
        clock: Callable[[], datetime],
        identity: str,
        log: Callable[[str], None],
    ) -> None:
        self._api = api
        self._store = store
        self._clock = clock
        self._identity = identity
        self._log = log

    def event(self, obj: WorkloadObject, reason: str, message: str, warning: bool = False) -> None:
        """Record an Event about the object (component nodeau-controller)."""
        events.record(
            self._api,
            workload=obj.name,
            involved=obj,
            reason=reason,
            message=message,
            at=self._clock(),
            identity=self._identity,
            warning=warning,
        )
        self._log(f"{obj.title}: {reason}: {message}")

    def reconcile(self, kind: WorkloadKind, name: str, fleet: Callable[[], FleetInputs]) -> None:
        """Bring one object one step (or several) closer to what it asks for."""
        obj = get_object(self._api, kind, name)
        if obj is None:
            self._orphan(kind, name)
            return
        meta = obj.body["metadata"]
        if meta.get("deletionTimestamp"):
            self._finish_deletion(obj)
            return
        if r.FINALIZER not in (meta.get("finalizers") or []):
            if not self._set_finalizers(obj, [*(meta.get("finalizers") or []), r.FINALIZER]):
                return
            obj = get_object(self._api, kind, name)
            if obj is None:
                return
        state = obj.status.get("state")
        if state == REFUSED:
            return
        if not state and not self._decide(obj, fleet()):
            return
        obj = get_object(self._api, kind, name)
        record = None if obj is None else record_of(obj)
        if obj is None or record is None or not holds_gpu(record.workload.state):
            return
        self._drive(obj, record)

    def _decide(self, obj: WorkloadObject, inputs: FleetInputs) -> bool:
        ask = ask_of(obj.kind, obj.body)
        now = self._clock()
        decide = decider(
            ask, reports=inputs.reports, marks=inputs.marks, health=inputs.health, now=now
        )
        outcome = self._store.admit(decide)
        if not is_successful(outcome):
            refusal = outcome.failure()
            self._store.record_refusal(obj.kind, obj.name, refusal, now)
            self._log(f"{obj.title}: refused: {refusal.code.value}: {refusal.sentence}")
            return False
        placement = outcome.unwrap().placement
        self.event(obj, "Placed", placement.why)
        return True

    def _drive(self, obj: WorkloadObject, record: WorkloadRecord) -> None:
        w = record.workload
        pod = read_pod(self._api, w.kind.value, w.name)
        if pod is None:
            if w.state in NO_POD_STATES:
                return
            uid = str(obj.body["metadata"].get("uid", ""))
            if create_pod(self._api, pod_manifest(record, uid)):
                self.event(
                    obj,
                    "Started",
                    f"model server Pod {r.server_pod_name(w.kind.value, w.name)} created on "
                    f"{w.machine} ({short_gpu(w.gpu_uuid)})",
                )
            if w.state is not WorkloadState.STARTING:
                self._move(w.name, WorkloadState.STARTING)
            return
        if pod.deleting:
            return
        if w.kind is WorkloadKind.BATCH:
            self._drive_batch(obj, record, pod)
        else:
            self._drive_service(obj, record, pod)

    def _move(self, name: str, state: WorkloadState) -> WorkloadRecord:
        now = self._clock()
        return self._store.update(name, lambda rec: with_state(rec, state, now))

    def _drive_batch(self, obj: WorkloadObject, record: WorkloadRecord, pod: PodView) -> None:
        w = record.workload
        if pod.phase in ("Succeeded", "Failed"):
            done = WorkloadState.SUCCEEDED if pod.phase == "Succeeded" else WorkloadState.FAILED
            now = self._clock()
            self._store.release(w.name, lambda rec: with_state(rec, done, now))  # Event Released
            self._log(f"{obj.title}: {done.value}; {w.gpu_uuid} on {w.machine} is free again")
        elif pod.phase == "Running" and pod.ready and w.state in STARTED_STATES:
            self._move(w.name, WorkloadState.RUNNING)
            self.event(obj, "Running", f"running on {w.machine} ({short_gpu(w.gpu_uuid)})")

    def _drive_service(self, obj: WorkloadObject, record: WorkloadRecord, pod: PodView) -> None:
        w = record.workload
        up = pod.phase == "Running" and pod.ready and pod.pod_ip is not None
        if not up:
            if w.state is WorkloadState.ADMITTED:
                self._move(w.name, WorkloadState.STARTING)
            return
        if w.state in STARTED_STATES:
            self._move(w.name, WorkloadState.SERVING)
        stopped = ask_of(obj.kind, obj.body).endpoint_stopped
        endpoint = "" if stopped else endpoint_of(pod)
        ready = [c for c in obj.status.get("conditions") or [] if c.get("type") == "Ready"]
        reason = "EndpointStopped" if stopped else "Serving"
        if obj.status.get("endpoint", "") == endpoint and ready and ready[0]["reason"] == reason:
            return
        if stopped:
            message = f"the endpoint is off; the model stays loaded on {w.machine}"
        else:
            message = f"serving at {endpoint} on {w.machine} ({short_gpu(w.gpu_uuid)})"
        self._store.set_status(
            obj.kind, obj.name, {"endpoint": endpoint}, [("Ready", not stopped, reason, message)]
        )
        self.event(obj, "Stopped" if stopped else "Serving", message)

    def _finish_deletion(self, obj: WorkloadObject) -> None:
        meta = obj.body["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if r.FINALIZER not in finalizers:
            return
        kind_label = obj.kind.value
        if read_pod(self._api, kind_label, obj.name) is not None:
            delete_pod(self._api, kind_label, obj.name)
            if read_pod(self._api, kind_label, obj.name) is not None:
                return  # the card is released once the Pod is gone (its watch brings us back)
        record = record_of(obj)
        if record is not None and holds_gpu(record.workload.state):
            now = self._clock()
            with suppress(UnknownWorkload):  # the store's release records Event "Released"
                self._store.release(
                    obj.name, lambda rec: with_state(rec, WorkloadState.STOPPED, now)
                )
            self._log(f"{obj.title}: deleted; its card is free again")
        self._set_finalizers(obj, [f for f in finalizers if f != r.FINALIZER])

    def _set_finalizers(self, obj: WorkloadObject, finalizers: list[str]) -> bool:
        """Replace the finalizers under the object's resourceVersion; False if it changed."""
        meta = obj.body["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        custom: Any = client.CustomObjectsApi(self._api)
        try:
            with api_errors(f"set the finalizers of {obj.title}"):
                try:
                    custom.patch_namespaced_custom_object(
                        r.GROUP, r.VERSION, r.NAMESPACE, PLURALS[obj.kind], obj.name, patch
                    )
                except ApiException as exc:
                    if exc.status == 404:
                        return False
                    raise
        except Conflict:
            return False  # it changed since it was read: its watch event brings it back
        return True

    def _orphan(self, kind: WorkloadKind, name: str) -> None:
        """A Pod whose object is gone (a finalizer removed by hand) is deleted too."""
        if read_pod(self._api, kind.value, name) is not None:
            delete_pod(self._api, kind.value, name)
            self._log(f"{PLURALS[kind]}/{name} is gone; its Pod is deleted")
