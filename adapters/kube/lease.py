"""The controllers' leader Lease, and a client whose writes wait on leading (docs/adr/0015).

Why it is so: docs/adr/decisions/adapters-kube.md (lease.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, NotFound, api_errors, send_json
from nodeau.adapters.kube.reports import lease_moment, micro_time
from nodeau.domain.leadership import LeaseRecord
from nodeau.ports.cluster import ClusterError
from nodeau.ports.leader_lease import LeaseRead

LEADER_LEASE = "nodeau-controller"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def record_of(lease: Mapping[str, Any]) -> LeaseRead:
    """The record a Lease (plain JSON) states, and its resourceVersion."""
    spec = lease.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    transitions = spec.get("leaseTransitions")
    record = LeaseRecord(
        holder=str(spec["holderIdentity"]) if spec.get("holderIdentity") else None,
        duration_s=duration if isinstance(duration, int) else None,
        acquired_at=lease_moment(spec.get("acquireTime")),
        renewed_at=lease_moment(spec.get("renewTime")),
        transitions=transitions if isinstance(transitions, int) and transitions >= 0 else 0,
    )
    return LeaseRead(record=record, version=str(lease["metadata"]["resourceVersion"]))


def lease_body(record: LeaseRecord, version: str | None) -> dict[str, Any]:
    """The whole Lease saying ``record`` (conditional on ``version`` when given)."""
    spec: dict[str, Any] = {"leaseTransitions": record.transitions}
    if record.holder is not None:
        spec["holderIdentity"] = record.holder
    if record.duration_s is not None:
        spec["leaseDurationSeconds"] = record.duration_s
    if record.acquired_at is not None:
        spec["acquireTime"] = micro_time(record.acquired_at)
    if record.renewed_at is not None:
        spec["renewTime"] = micro_time(record.renewed_at)
    metadata: dict[str, Any] = {
        "name": LEADER_LEASE,
        "namespace": r.NAMESPACE,
        "labels": {"app.kubernetes.io/component": r.CONTROLLER_COMPONENT},
    }
    if version is not None:
        metadata["resourceVersion"] = version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
            "spec": spec}  # fmt: skip


class KubeLeaderLease:
    """``ports.leader_lease.LeaderLease`` as Lease ``nodeau-system/nodeau-controller``."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self._what = f"the leader Lease {r.NAMESPACE}/{LEADER_LEASE}"

    def read(self) -> LeaseRead | None:
        leases: Any = client.CoordinationV1Api(self._api)
        try:
            with api_errors(f"read {self._what}"):
                response = leases.read_namespaced_lease(
                    LEADER_LEASE, r.NAMESPACE, _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )  # fmt: skip
        except NotFound:
            return None
        return record_of(json.loads(response.data))

    def create(self, record: LeaseRecord) -> LeaseRead | None:
        try:
            with api_errors(f"create {self._what}"):
                made = send_json(
                    self._api, "POST", LEASES, {"namespace": r.NAMESPACE}, lease_body(record, None)
                )
        except Conflict:
            return None
        return record_of(made)

    def replace(self, record: LeaseRecord, version: str) -> LeaseRead | None:
        where = {"namespace": r.NAMESPACE, "name": LEADER_LEASE}
        try:
            with api_errors(f"renew {self._what}"):
                made = send_json(
                    self._api, "PUT", f"{LEASES}/{{name}}", where, lease_body(record, version)
                )
        except (Conflict, NotFound):
            return None
        return record_of(made)


class FencedApiClient(client.ApiClient):
    """An API client that calls ``fence`` before every write it sends, and says when a write
    answered later than the leadership ``fence`` had left: it may have landed after it."""

    def __init__(
        self,
        configuration: Any,
        fence: Callable[[], float],
        manager: str,
        log: Callable[[str], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(configuration=configuration)
        self._fence = fence
        self._log = log
        self._monotonic = monotonic
        self.user_agent = f"{manager}/nodeau"

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() not in WRITES:
            return super().call_api(method, url, *args, **kwargs)
        left = self._fence()
        sent = self._monotonic()
        try:
            return super().call_api(method, url, *args, **kwargs)
        finally:
            took = self._monotonic() - sent
            if took >= left:
                self._log(late_write(method.upper(), url, left, took))


def late_write(method: str, url: str, left: float, took: float) -> str:
    """The line said of a write that answered after the leadership it was fenced with."""
    path = url.split("://", 1)[-1].partition("/")[2].partition("?")[0]
    return (
        f"a write sent while leading, {method} /{path}, answered {took:.1f} s later with"
        f" {left:.1f} s of leadership left when sent: it may have landed after the Lease"
        " changed hands (the process was paused or the request was slow)"
    )


def fenced_client(
    api: Any, fence: Callable[[], float], identity: str, log: Callable[[str], None]
) -> Any:
    """A client on ``api``'s configuration whose writes first call ``fence`` (it raises to
    stop one, else returns the seconds of leadership left), recorded by the API server as
    field manager ``nodeau-controller-<identity>``; ``log`` hears of a late answer."""
    manager = field_manager(identity)
    return FencedApiClient(api.configuration, fence, manager, log)


def field_manager(identity: str) -> str:
    """The field manager the API server records a controller's writes under."""
    manager = f"{r.CONTROLLER_COMPONENT}-{identity}"
    if len(manager) > 128 or "/" in manager or not manager.isprintable():
        raise ClusterError(
            f"a controller identity must be printable, without '/', got {identity!r}"
        )
    return manager
