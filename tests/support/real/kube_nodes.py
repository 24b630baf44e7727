"""KWOK nodes for the Kubernetes tests: machines whose kubelet KWOK plays.

A node annotated ``kwok.x-k8s.io/node=fake`` turns Ready, its Lease renewed, its Pods Running.
``wait_for`` polls with a generous deadline (never a fixed sleep then a timing assertion).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.kube import resources as r
from tests.support.real.kube_cluster import KWOK_ANNOTATION


def kwok_node(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Node body KWOK manages, with these labels."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def create_kwok_nodes(api: client.ApiClient, names: Iterable[str]) -> None:
    """Create a KWOK node per name (no labels)."""
    core: Any = client.CoreV1Api(api)  # plain dict bodies
    for name in names:
        core.create_node(kwok_node(name))


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll ``predicate`` until it holds; AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def node_lease_renewed(api: client.ApiClient, name: str) -> bool:
    """Whether the node's Lease in kube-node-lease exists and carries a renewTime."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(name, r.NODE_LEASE_NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return lease.spec is not None and lease.spec.renew_time is not None


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


READINESS = ("Ready", "ContainersReady")
