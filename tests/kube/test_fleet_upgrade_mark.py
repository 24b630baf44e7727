"""``nodeau fleet upgrade`` against a real API server: the installed command sets the Node
label ``nodeau.ai/upgrading``, ``fleet list`` shows it, ``--done`` takes it off, and no Pod
is touched. Then a person holding only deploy/'s ``nodeau-machine-marks`` roles (bound to a
ServiceAccount whose token the API server issues) can mark and unmark, and is refused
everything else the test tries.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from tests.support.real.cli import Cli
from tests.support.real.kube_apply import DEPLOY, apply_manifests, service_account_token
from tests.support.real.kube_cli import banner, one_line_error, write_ledger
from tests.support.real.kube_cluster import Cluster, write_kubeconfig
from tests.support.real.kube_nodes import create_kwok_nodes

MARKER = "marker"  # the ServiceAccount standing for a person who marks machines
ISSUER = "https://kubernetes.default.svc"
NS = f"/api/v1/namespaces/{r.NAMESPACE}"
MARKED = (
    "n1 is marked upgrading: nothing on it moves and nothing new is placed there until "
    "nodeau fleet upgrade --node n1 --done; its 1 running workload(s) are not stopped, moved "
    "or restarted"
)
CLEARED = (
    "n1 is no longer marked upgrading: it takes new placements again, and its workloads' "
    "recovery choices apply again if it stops answering; nothing moves now"
)


@pytest.fixture
def api(fresh_fleet: client.ApiClient) -> Iterator[client.ApiClient]:
    """Two KWOK machines; n1 runs a model server Pod holding one card."""
    create_kwok_nodes(fresh_fleet, ["n1", "n2"])
    client.CoreV1Api(fresh_fleet).create_namespaced_pod(
        r.NAMESPACE,
        {
            "metadata": {"name": "service-chat", "labels": {r.WORKLOAD_LABEL: "chat"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "server", "image": "x"}]},
        },
    )
    write_ledger(
        fresh_fleet, [{"workload": "chat", "machine": "n1", "gpu_uuid": "GPU-1", "bytes": 1024}]
    )
    yield fresh_fleet


def as_fleet(home: Path, kubeconfig: Path) -> Cli:
    return Cli(home, timeout_s=120, NODEAU_PLANE="kubernetes", KUBECONFIG=str(kubeconfig))


def upgrading_label(api: client.ApiClient, node: str) -> str | None:
    labels = client.CoreV1Api(api).read_node(node).metadata.labels or {}
    return labels.get(r.UPGRADING_LABEL)


def column(listing: str, machine: str, name: str) -> str:
    """One cell of ``fleet list``'s table (columns are two or more spaces apart)."""
    import re

    lines = listing.splitlines()
    header = re.split(r"\s{2,}", lines[2])
    rows = {line.split()[0]: re.split(r"\s{2,}", line) for line in lines[3:] if line.strip()}
    return dict(zip(header, rows[machine], strict=True))[name]


def test_upgrade_sets_the_label_fleet_list_shows_it_and_done_takes_it_off_touching_no_pod(
    cluster: Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    cli = as_fleet(tmp_path / "home", cluster.kubeconfig)
    pod = client.CoreV1Api(api).read_namespaced_pod("service-chat", r.NAMESPACE)

    done = cli("fleet", "upgrade", "--node", "n1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [banner(cluster)]
    assert done.stdout.strip() == MARKED
    assert upgrading_label(api, "n1") == "true"
    assert upgrading_label(api, "n2") is None

    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict)
    assert {m["machine"]: m["upgrading"] for m in listing["machines"]} == {
        "n1": True,
        "n2": False,
    }
    text = cli("fleet", "list").stdout
    assert (column(text, "n1", "UPGRADING"), column(text, "n2", "UPGRADING")) == ("yes", "no")

    cleared = cli.json("fleet", "upgrade", "--node", "n1", "--done")
    assert cleared == {
        "plane": banner(cluster).removeprefix("nodeau: "),
        "machine": "n1",
        "upgrading": False,
        "sentence": CLEARED,
    }
    assert upgrading_label(api, "n1") is None
    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict)
    assert [m["upgrading"] for m in listing["machines"]] == [False, False]

    after = client.CoreV1Api(api).read_namespaced_pod("service-chat", r.NAMESPACE)
    assert after.metadata.uid == pod.metadata.uid
    assert after.metadata.deletion_timestamp is None and after.spec.node_name == "n1"

    line = one_line_error(cli("fleet", "upgrade", "--node", "nowhere"))
    assert (
        line == "nodeau: no machine called 'nowhere' in the cluster; nodeau fleet list lists them"
    )


def binding(kind: str) -> dict[str, Any]:
    """A binding of deploy/'s nodeau-machine-marks ``kind`` (ClusterRole or Role) to MARKER."""
    return {
        "metadata": {"name": f"{MARKER}-marks"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": kind,
            "name": "nodeau-machine-marks",
        },
        "subjects": [{"kind": "ServiceAccount", "name": MARKER, "namespace": r.NAMESPACE}],
    }


def bind_marker(api: client.ApiClient) -> None:
    """deploy/20-rbac.yaml applied, and its nodeau-machine-marks roles bound to MARKER, as a
    cluster's admin binds them to a person."""
    apply_manifests(api, [DEPLOY / "20-rbac.yaml"])
    rbac = client.RbacAuthorizationV1Api(api)
    client.CoreV1Api(api).create_namespaced_service_account(
        r.NAMESPACE, {"metadata": {"name": MARKER}}
    )
    rbac.create_cluster_role_binding(binding("ClusterRole"))
    rbac.create_namespaced_role_binding(r.NAMESPACE, binding("Role"))


@pytest.fixture
def marker(cluster: Cluster, api: client.ApiClient) -> Iterator[str]:
    """A token of a person holding only the nodeau-machine-marks roles."""
    bind_marker(api)
    try:
        yield service_account_token(api, r.NAMESPACE, MARKER, ISSUER)
    finally:
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.delete_cluster_role_binding(f"{MARKER}-marks")
        rbac.delete_namespaced_role_binding(f"{MARKER}-marks", r.NAMESPACE)
        client.CoreV1Api(api).delete_namespaced_service_account(MARKER, r.NAMESPACE)


def test_a_person_with_only_the_machine_marks_roles_marks_and_is_refused_the_rest_tried(
    cluster: Cluster, api: client.ApiClient, marker: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "marker-kubeconfig"
    write_kubeconfig(
        kubeconfig, server=cluster.server, ca_file=cluster.ca_file, token=marker, user=MARKER
    )
    cli = as_fleet(tmp_path / "home", kubeconfig)

    done = cli("fleet", "upgrade", "--node", "n1")
    assert (done.returncode, done.stdout.strip()) == (0, MARKED), done.stderr
    assert upgrading_label(api, "n1") == "true"
    done = cli("fleet", "upgrade", "--node", "n1", "--done")
    assert (done.returncode, done.stdout.strip()) == (0, CLEARED), done.stderr
    assert upgrading_label(api, "n1") is None
    done = cli("scheduling", "drain", "--node", "n2")  # the other machine mark it is for
    assert done.returncode == 0, done.stderr

    refused: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "delete a node": ("DELETE", "/api/v1/nodes/n1", None),
        "create a node": ("POST", "/api/v1/nodes", {"metadata": {"name": "n9"}}),
        "read a node's status": ("GET", "/api/v1/nodes/n1/status", None),
        "delete a pod": ("DELETE", f"{NS}/pods/service-chat", None),
        "list pods": ("GET", f"{NS}/pods", None),
        "write the scheduling policy": (
            "POST", f"{NS}/configmaps", {"metadata": {"name": r.SCHEDULING_CONFIGMAP}},
        ),
        "read the health": ("GET", f"{NS}/configmaps/{r.HEALTH_CONFIGMAP}", None),
        "read secrets": ("GET", f"{NS}/secrets", None),
        "list gpuservices": ("GET", f"/apis/{r.API_VERSION}/namespaces/{r.NAMESPACE}/gpuservices",
                             None),
    }  # fmt: skip
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    headers = {"Authorization": f"Bearer {marker}"}
    with httpx.Client(base_url=cluster.server, headers=headers, verify=context) as http:
        for what, (method, path, body) in refused.items():
            answer = http.request(method, path, json=body)
            assert answer.status_code == 403, (what, answer.text)
        review = {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "*", "resource": "*", "group": "*"}},
        }  # fmt: skip
        answer = http.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
        assert answer.status_code == 201, answer.text
        assert answer.json()["status"]["allowed"] is False  # not everything, by far
    assert client.CoreV1Api(api).read_node("n1").metadata.deletion_timestamp is None
