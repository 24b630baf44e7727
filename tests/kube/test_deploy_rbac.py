"""deploy/20-rbac.yaml on a real API server: the controller and the agent may do what they need
and nothing else, proved with tokens the API server issues to their ServiceAccounts, by real
requests (and access reviews for what a request cannot show, such as finalizers and watch).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.claims import PLURAL, body_of, name_of
from nodeau.domain.recording import Claim
from nodeau.domain.reservations import Reservation
from tests.support.real.kube_apply import MANIFESTS, apply_manifests, service_account_token
from tests.support.real.kube_cluster import Cluster

ISSUER = "https://kubernetes.default.svc"
CONTROLLER, AGENT = "nodeau-controller", "nodeau-agent"
NS = f"/api/v1/namespaces/{r.NAMESPACE}"
CRS = f"/apis/{r.API_VERSION}/namespaces/{r.NAMESPACE}"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{}/leases"
POD = {"metadata": {"name": "service-chat"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
SECRET = {"metadata": {"name": "service-chat-key"}, "data": {"api-key": "a2V5"}}
EVENT_ABOUT = {"kind": r.GPUSERVICE_KIND, "namespace": r.NAMESPACE, "name": "chat"}
CORE_EVENT = {
    "metadata": {"name": "chat.admitted"}, "involvedObject": EVENT_ABOUT, "reason": "Admitted",
    "message": "fits", "type": "Normal", "source": {"component": r.CONTROLLER_COMPONENT},
}  # fmt: skip
NEW_EVENT = {
    "metadata": {"name": "chat.placed"}, "regarding": EVENT_ABOUT, "reason": "Placed",
    "note": "on garage", "type": "Normal", "action": "Place",
    "eventTime": "2026-12-01T10:00:00.000000Z", "reportingController": "nodeau.ai/controller",
    "reportingInstance": "nodeau-controller-0",
}  # fmt: skip
HELD = Reservation(workload="chat", machine="garage", gpu_uuid="GPU-1", bytes=1 << 30)
CLAIM = Claim(by="nodeau-controller-0", at=datetime(2026, 12, 1, 10, tzinfo=UTC))
OTHER = Reservation(workload="embed", machine="garage", gpu_uuid="GPU-2", bytes=1 << 30)
RESERVATION = f"{CRS}/{PLURAL}/{name_of(HELD.gpu_uuid)}"
Body = Callable[[httpx.Client], dict[str, Any]] | dict[str, Any] | None


def lease(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": "garage"}}


def current(path: str, **changes: Any) -> Callable[[httpx.Client], dict[str, Any]]:
    """The object at ``path`` as the admin reads it now, with top-level ``changes``."""

    def body(admin: httpx.Client) -> dict[str, Any]:
        read = admin.get(path)
        read.raise_for_status()
        obj: dict[str, Any] = read.json()
        return {**obj, **changes}

    return body


ROWS: dict[str, tuple[str, bool, str, str, Body]] = {
    "controller lists gpuservices": (CONTROLLER, True, "GET", f"{CRS}/gpuservices", None),
    "controller updates gpuservices/status": (
        CONTROLLER, True, "PUT", f"{CRS}/gpuservices/chat/status",
        current(f"{CRS}/gpuservices/chat", status={"state": "admitted"}),
    ),
    "controller creates pods in nodeau-system": (CONTROLLER, True, "POST", f"{NS}/pods", POD),
    "controller claims a card": (
        CONTROLLER, True, "POST", f"{CRS}/{PLURAL}", body_of(OTHER, CLAIM)
    ),
    "controller lists the reservations": (CONTROLLER, True, "GET", f"{CRS}/{PLURAL}", None),
    "controller frees a card": (CONTROLLER, True, "DELETE", RESERVATION, None),
    "controller cannot change a reservation": (
        CONTROLLER, False, "PUT", RESERVATION, current(RESERVATION)
    ),
    "controller cannot patch a reservation": (
        CONTROLLER, False, "PATCH", RESERVATION, {"spec": {"bytes": 1}}
    ),
    "controller creates the health configmap": (
        CONTROLLER, True, "POST", f"{NS}/configmaps", {"metadata": {"name": r.HEALTH_CONFIGMAP}}
    ),
    "controller creates core events": (CONTROLLER, True, "POST", f"{NS}/events", CORE_EVENT),
    "controller creates events.k8s.io events": (
        CONTROLLER, True, "POST", f"/apis/events.k8s.io/v1/namespaces/{r.NAMESPACE}/events",
        NEW_EVENT,
    ),
    "controller lists nodes": (CONTROLLER, True, "GET", "/api/v1/nodes", None),
    "controller gets node leases": (
        CONTROLLER, True, "GET", LEASES.format(r.NODE_LEASE_NAMESPACE) + "/garage", None
    ),
    "controller lists agent leases": (CONTROLLER, True, "GET", LEASES.format(r.NAMESPACE), None),
    "controller cannot delete nodes": (CONTROLLER, False, "DELETE", "/api/v1/nodes/garage", None),
    "controller cannot patch nodes": (CONTROLLER, False, "PATCH", "/api/v1/nodes/garage", {}),
    "controller cannot read secrets": (CONTROLLER, False, "GET", f"{NS}/secrets", None),
    "controller creates a model server's key": (
        CONTROLLER, True, "POST", f"{NS}/secrets", SECRET
    ),
    "controller cannot read a model server's key": (
        CONTROLLER, False, "GET", f"{NS}/secrets/service-x-key", None
    ),
    "controller cannot create pods in default": (
        CONTROLLER, False, "POST", "/api/v1/namespaces/default/pods", POD
    ),
    "controller cannot write node leases": (
        CONTROLLER, False, "POST", LEASES.format(r.NODE_LEASE_NAMESPACE), lease("garage")
    ),
    "controller cannot renew node leases": (
        CONTROLLER, False, "PUT", LEASES.format(r.NODE_LEASE_NAMESPACE) + "/garage",
        current(LEASES.format(r.NODE_LEASE_NAMESPACE) + "/garage"),
    ),
    "controller watches the health by name": (
        CONTROLLER, True, "GET",
        f"{NS}/configmaps?fieldSelector=metadata.name%3D{r.HEALTH_CONFIGMAP}", None,
    ),
    "controller cannot list every configmap": (CONTROLLER, False, "GET", f"{NS}/configmaps", None),
    "controller cannot change the scheduling policy": (
        CONTROLLER, False, "PUT", f"{NS}/configmaps/{r.SCHEDULING_CONFIGMAP}",
        current(f"{NS}/configmaps/{r.SCHEDULING_CONFIGMAP}", data={r.POLICY_KEY: "spread"}),
    ),
    "agent creates its lease": (
        AGENT, True, "POST", LEASES.format(r.NAMESPACE), lease(r.agent_lease_name("bench"))
    ),
    "agent updates its lease": (
        AGENT, True, "PUT", LEASES.format(r.NAMESPACE) + "/" + r.agent_lease_name("garage"),
        current(LEASES.format(r.NAMESPACE) + "/" + r.agent_lease_name("garage")),
    ),
    "agent gets nodes": (AGENT, True, "GET", "/api/v1/nodes/garage", None),
    "agent cannot list gpuservices": (AGENT, False, "GET", f"{CRS}/gpuservices", None),
    "agent cannot create pods": (AGENT, False, "POST", f"{NS}/pods", POD),
    "agent cannot read secrets": (AGENT, False, "GET", f"{NS}/secrets", None),
    "agent cannot update configmaps": (
        AGENT, False, "PUT", f"{NS}/configmaps/{r.SCHEDULING_CONFIGMAP}",
        current(f"{NS}/configmaps/{r.SCHEDULING_CONFIGMAP}"),
    ),
    "agent cannot list other agents' leases": (
        AGENT, False, "GET", LEASES.format(r.NAMESPACE), None
    ),
    "agent reads the copy requests": (
        AGENT, True, "GET", f"{NS}/configmaps/{r.COPIES_CONFIGMAP}", None
    ),
    "agent cannot write the copy requests": (
        AGENT, False, "PUT", f"{NS}/configmaps/{r.COPIES_CONFIGMAP}",
        current(f"{NS}/configmaps/{r.COPIES_CONFIGMAP}", data={r.COPIES_KEY: "[]"}),
    ),
    "agent cannot read the reservations": (AGENT, False, "GET", RESERVATION, None),
    "agent cannot claim a card": (AGENT, False, "POST", f"{CRS}/{PLURAL}", body_of(OTHER, CLAIM)),
    "agent cannot free a card": (AGENT, False, "DELETE", RESERVATION, None),
    "controller creates a lease (create cannot be named)": (
        CONTROLLER, True, "POST", LEASES.format(r.NAMESPACE), lease("nodeau-controller-2")
    ),
    "controller renews the leader lease": (
        CONTROLLER, True, "PUT", LEASES.format(r.NAMESPACE) + "/nodeau-controller",
        current(LEASES.format(r.NAMESPACE) + "/nodeau-controller"),
    ),
    "controller cannot renew an agent's lease": (
        CONTROLLER, False, "PUT", LEASES.format(r.NAMESPACE) + "/" + r.agent_lease_name("garage"),
        current(LEASES.format(r.NAMESPACE) + "/" + r.agent_lease_name("garage")),
    ),
    "controller replaces the copy requests": (
        CONTROLLER, True, "PUT", f"{NS}/configmaps/{r.COPIES_CONFIGMAP}",
        current(f"{NS}/configmaps/{r.COPIES_CONFIGMAP}", data={r.COPIES_KEY: "[]"}),
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def tokens(cluster: Cluster) -> dict[str, str]:
    """deploy/ applied, and a token for each ServiceAccount issued by the API server."""
    admin: Any = config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
    with admin as api:
        apply_manifests(api, MANIFESTS)
        return {
            name: service_account_token(api, r.NAMESPACE, name, ISSUER)
            for name in (CONTROLLER, AGENT)
        }


def as_identity(cluster: Cluster, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=cluster.server, headers={"Authorization": f"Bearer {token}"},
        verify=ssl.create_default_context(cafile=str(cluster.ca_file)), timeout=10.0,
    )  # fmt: skip


@pytest.fixture
def world(fresh_fleet: client.ApiClient) -> client.ApiClient:
    """What the requests act on: a Node, its Lease, an agent Lease, ConfigMaps, a GPUService,
    a card's Reservation."""
    core, leases = client.CoreV1Api(fresh_fleet), client.CoordinationV1Api(fresh_fleet)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="garage")))
    for namespace, name in (
        (r.NODE_LEASE_NAMESPACE, "garage"),
        (r.NAMESPACE, r.agent_lease_name("garage")),
        (r.NAMESPACE, "nodeau-controller"),  # the controllers' leader Lease
    ):
        spec = client.V1LeaseSpec(holder_identity="garage")
        leases.create_namespaced_lease(
            namespace, client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=spec)
        )
    for name in (r.SCHEDULING_CONFIGMAP, r.COPIES_CONFIGMAP):
        core.create_namespaced_config_map(
            r.NAMESPACE, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name))
        )
    service = {
        "apiVersion": r.API_VERSION,
        "kind": r.GPUSERVICE_KIND,
        "metadata": {"name": "chat"},
        "spec": {"model": "qwen2.5-0.5b-instruct"},
    }
    custom = client.CustomObjectsApi(fresh_fleet)
    custom.create_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service)
    custom.create_namespaced_custom_object(  # one card's claim
        r.GROUP, r.VERSION, r.NAMESPACE, PLURAL, body_of(HELD, CLAIM)
    )
    return fresh_fleet


@pytest.mark.parametrize("row", ROWS, ids=list(ROWS))
def test_each_identity_may_do_what_it_needs_and_nothing_else(
    cluster: Cluster, tokens: dict[str, str], world: client.ApiClient, row: str
) -> None:
    identity, allowed, method, path, body = ROWS[row]
    with cluster.http() as admin:
        payload = body(admin) if callable(body) else body
    headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
    with as_identity(cluster, tokens[identity]) as http:
        answer = http.request(method, path, json=payload, headers=headers)
    if allowed:
        assert answer.is_success, answer.text
    else:
        assert answer.status_code == 403, answer.text
        assert f"system:serviceaccount:{r.NAMESPACE}:{identity}" in answer.json()["message"]


@pytest.mark.parametrize("identity", [CONTROLLER, AGENT])
def test_a_token_is_the_service_account_it_was_issued_for(
    cluster: Cluster, tokens: dict[str, str], identity: str
) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    with as_identity(cluster, tokens[identity]) as http:
        answer = http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json=review)
    assert answer.status_code == 201, answer.text
    user = answer.json()["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{r.NAMESPACE}:{identity}"


REVIEWS = {
    "controller updates finalizers": (CONTROLLER, True, "update", "gpuservices", "finalizers"),
    "controller watches batchjobs": (CONTROLLER, True, "watch", "batchjobs", ""),
    "controller deletes pods": (CONTROLLER, True, "delete", "pods", ""),
    "controller cannot do everything": (CONTROLLER, False, "*", "*", ""),
    "agent cannot update finalizers": (AGENT, False, "update", "gpuservices", "finalizers"),
    "agent cannot watch leases": (AGENT, False, "watch", "leases", ""),
    "controller watches reservations": (CONTROLLER, True, "watch", PLURAL, ""),
    "controller cannot update reservations": (CONTROLLER, False, "update", PLURAL, ""),
    "agent cannot list reservations": (AGENT, False, "list", PLURAL, ""),
}
GROUPS = {
    "gpuservices": r.GROUP, "batchjobs": r.GROUP, PLURAL: r.GROUP, "leases": "coordination.k8s.io",
}  # fmt: skip


@pytest.mark.parametrize("case", REVIEWS, ids=list(REVIEWS))
def test_access_reviews_agree_for_what_a_request_cannot_show(
    cluster: Cluster, tokens: dict[str, str], case: str
) -> None:
    identity, allowed, verb, resource, subresource = REVIEWS[case]
    attributes = {
        "namespace": r.NAMESPACE, "verb": verb, "resource": resource,
        "subresource": subresource, "group": GROUPS.get(resource, ""),
    }  # fmt: skip
    review = {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }  # fmt: skip
    with as_identity(cluster, tokens[identity]) as http:
        answer = http.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"]["allowed"] is allowed
