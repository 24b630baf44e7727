"""A real control plane for the Kubernetes tests: one per test worker, shared by its tests.

etcd, kube-apiserver and KWOK start once per worker (a few seconds); the namespace and
CRDs from deploy/ are applied as a user applies them. ``fresh_fleet`` gives a test an
empty fleet: no nodes, no Nodeau objects, no ledger.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config, utils

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.claims import PLURAL as RESERVATIONS
from tests.support.kube_cluster import Cluster, ControlPlane

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE_MANIFESTS = ("00-namespace.yaml", "10-crds.yaml")
WORKLOADS = (r.GPUSERVICES, r.BATCHJOBS)


def api_client(cluster: Cluster) -> client.ApiClient:
    """A kubernetes client configured from the cluster's kubeconfig, as kubectl would be."""
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


def wait_established(api: client.ApiClient, names: tuple[str, ...], timeout_s: float = 30) -> None:
    ext = client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        crds = {c.metadata.name: c for c in ext.list_custom_resource_definition().items}
        if all(
            name in crds
            and any(
                c.type == "Established" and c.status == "True"
                for c in (crds[name].status.conditions or [])
            )
            for name in names
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"CRDs not established within {timeout_s} s: {names}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    plane = ControlPlane(tmp_path_factory.mktemp("kube"))
    try:
        started = plane.start()
        with api_client(started) as api:
            for manifest in BASE_MANIFESTS:
                utils.create_from_yaml(api, str(DEPLOY / manifest))
            wait_established(
                api, tuple(f"{plural}.{r.GROUP}" for plural in (*WORKLOADS, RESERVATIONS))
            )
        yield started
    finally:
        plane.stop()


@pytest.fixture
def kube(cluster: Cluster) -> Iterator[client.ApiClient]:
    """An admin API client for one test."""
    with api_client(cluster) as api:
        yield api


def empty_fleet(api: client.ApiClient) -> None:
    """Remove every node, Nodeau object (cards' Reservations too), Pod, Lease, ConfigMap,
    Secret (a model server's key: no garbage collector runs here) and Event a test left."""
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    coordination = client.CoordinationV1Api(api)
    for plural in (*WORKLOADS, RESERVATIONS):
        for item in custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, plural)[
            "items"
        ]:
            name = item["metadata"]["name"]
            if item["metadata"].get("finalizers"):
                custom.patch_namespaced_custom_object(
                    r.GROUP, r.VERSION, r.NAMESPACE, plural, name,
                    {"metadata": {"finalizers": None}},
                )  # fmt: skip
            try:  # one already being deleted goes as soon as its finalizer is off
                custom.delete_namespaced_custom_object(
                    r.GROUP, r.VERSION, r.NAMESPACE, plural, name
                )
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
    core.delete_collection_namespaced_pod(r.NAMESPACE, grace_period_seconds=0)
    core.delete_collection_namespaced_config_map(r.NAMESPACE)
    core.delete_collection_namespaced_secret(r.NAMESPACE)
    core.delete_collection_namespaced_event(r.NAMESPACE)
    coordination.delete_collection_namespaced_lease(r.NAMESPACE)
    coordination.delete_collection_namespaced_lease(r.NODE_LEASE_NAMESPACE)
    core.delete_collection_node()


@pytest.fixture
def fresh_fleet(kube: client.ApiClient) -> Iterator[client.ApiClient]:
    """An admin client on a cluster with no nodes and no Nodeau state; cleaned after too."""
    empty_fleet(kube)
    yield kube
    empty_fleet(kube)


@pytest.fixture(autouse=True)
def no_loopback_endpoint_left(tmp_path: Path) -> Iterator[None]:
    """``nodeau run`` on the fleet starts the workload's loopback endpoint on this machine
    (a supervised background process where no user service manager answers, as here):
    whatever a test's commands started under its folder is stopped after it."""
    yield
    from nodeau.adapters.supervised_process import BackgroundProcess

    for pid_file in sorted(tmp_path.rglob("run/*.pid")):
        BackgroundProcess(pid_file.parent, reason="the test is over").stop(pid_file.stem)


@pytest.fixture
def controller(cluster: Cluster, fresh_fleet: client.ApiClient) -> Iterator[None]:
    """The real controller (python -m nodeau.apps.controller) on the test cluster, with the
    kubeconfig's user and only the keys compiled into it (so on the Home plan)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nodeau.apps.controller", "--kubeconfig", str(cluster.kubeconfig)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=60)
