"""A real control plane for the Kubernetes tests: one per test worker, shared by its tests.

etcd, kube-apiserver and KWOK start once per worker, with deploy/'s namespace and CRDs applied.
``fresh_fleet`` empties the fleet; ``controller_process`` runs the installed controller; ``fleet``
is the CLI on one machine with two simulated cards.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, utils

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.claims import PLURAL as RESERVATIONS
from nodeau.adapters.kube.reports import publish_report
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.domain.fleet_reports import MachineReport
from tests.support.real.cli import Cli
from tests.support.real.kube_apply import (
    ISSUER,
    MANIFESTS,
    apply_manifests,
    kubeconfig_for_token,
    service_account_token,
)
from tests.support.real.kube_cluster import Cluster, ControlPlane, api_client
from tests.support.real.kube_nodes import create_kwok_nodes
from tests.support.real.kube_objects import NOW
from tests.support.real.kubelet import ended

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE_MANIFESTS = ("00-namespace.yaml", "10-crds.yaml")
WORKLOADS = (r.GPUSERVICES, r.BATCHJOBS)


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
        ended(process, grace_s=60)


@pytest.fixture
def controller_process(
    cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path
) -> Iterator[subprocess.Popen[str]]:
    """deploy/'s RBAC applied, and the controller running as its ServiceAccount."""
    apply_manifests(fresh_fleet, MANIFESTS)
    token = service_account_token(fresh_fleet, r.NAMESPACE, "nodeau-controller", ISSUER)
    config = kubeconfig_for_token(cluster, token, tmp_path / "controller.kubeconfig")
    log = (tmp_path / "controller.log").open("w")
    running = subprocess.Popen(
        [sys.executable, "-m", "nodeau.apps.controller", "--kubeconfig", str(config),
         "--identity", "whole-path", "--resync", "2"],
        stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield running
    finally:
        ended(running)
        log.close()


@pytest.fixture
def fleet(cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path) -> Cli:
    """The CLI on the fleet: machine m1, its two simulated 24 GiB cards reported at NOW."""
    create_kwok_nodes(fresh_fleet, ["m1"])
    reading = SimulatedGpuInventory("m1", "2 x 24 GiB").read()
    publish_report(fresh_fleet, MachineReport(reading=reading, at=NOW))
    return Cli(
        tmp_path / "fleet",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )
