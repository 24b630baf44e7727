"""The test control plane itself: a real API server, real etcd, KWOK running simulated nodes."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nodeau.adapters.kube import resources as r
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_nodes import kwok_node, wait_for


def test_the_api_server_is_ready_and_refuses_anonymous_requests(cluster: Cluster) -> None:
    with cluster.http() as http:
        assert http.get("/readyz").text == "ok"
        anonymous = http.get("/api/v1/nodes", headers={"Authorization": ""})
    assert anonymous.status_code in (401, 403)


def test_kwok_makes_a_node_ready_renews_its_lease_and_runs_its_pods(
    fresh_fleet: client.ApiClient,
) -> None:
    core = client.CoreV1Api(fresh_fleet)
    core.create_node(kwok_node("garage"))
    core.create_namespaced_pod(
        r.NAMESPACE,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe"},
            "spec": {"nodeName": "garage", "containers": [{"name": "c", "image": "none"}]},
        },
    )
    wait_for(
        lambda: core.read_namespaced_pod("probe", r.NAMESPACE).status.phase == "Running",
        "the probe Pod running on garage",
    )
    ready = {c.type: c.status for c in core.read_node("garage").status.conditions}
    assert ready["Ready"] == "True"
    lease = client.CoordinationV1Api(fresh_fleet).read_namespaced_lease(
        "garage", r.NODE_LEASE_NAMESPACE
    )
    assert lease.spec.lease_duration_seconds == 40
    assert lease.spec.renew_time is not None


def test_a_stale_write_is_a_conflict_not_a_silent_overwrite(fresh_fleet: client.ApiClient) -> None:
    core = client.CoreV1Api(fresh_fleet)
    created = core.create_namespaced_config_map(
        r.NAMESPACE, {"metadata": {"name": "probe"}, "data": {"n": "0"}}
    )
    first = created.metadata.resource_version
    core.replace_namespaced_config_map(
        "probe", r.NAMESPACE,
        {"metadata": {"name": "probe", "resourceVersion": first}, "data": {"n": "1"}},
    )  # fmt: skip
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map(
            "probe", r.NAMESPACE,
            {"metadata": {"name": "probe", "resourceVersion": first}, "data": {"n": "2"}},
        )  # fmt: skip
    assert stale.value.status == 409
    assert core.read_namespaced_config_map("probe", r.NAMESPACE).data == {"n": "1"}
