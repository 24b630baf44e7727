"""The whole path a user takes on a fleet: ``nodeau run`` -> the real controller process,
running as its own ServiceAccount with deploy/'s RBAC -> admission -> a Pod pinned to
its machine and card -> serving, as ``nodeau ps`` shows it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from nodeau.adapters.kube import resources as r
from tests.support.cli import Cli
from tests.support.kube_apply import MANIFESTS, apply_manifests, service_account_token
from tests.support.kube_cluster import Cluster
from tests.support.kube_controller import add_machine, gpu_uuid, small
from tests.support.kube_nodes import wait_for

# The test models are stand-ins (a made-up or random-weight GGUF) that prove nothing: serving
# them is the user's explicit choice (docs/adr/0010).
UNPROVED = ("--unproved",)

ISSUER = "https://kubernetes.default.svc"  # the API server's service-account issuer


def kubeconfig_for_token(cluster: Cluster, token: str, path: Path) -> Path:
    """A kubeconfig that talks to the test cluster as whoever ``token`` is."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "controller", "user": {"token": token}}],
        "contexts": [
            {
                "name": "controller",
                "context": {"cluster": admin["clusters"][0]["name"], "user": "controller"},
            }
        ],
        "current-context": "controller",
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


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
        running.terminate()
        running.wait(timeout=30)
        log.close()


def pod_of(api: client.ApiClient, name: str) -> Any:
    try:
        return client.CoreV1Api(api).read_namespaced_pod(f"service-{name}", r.NAMESPACE)
    except client.ApiException as exc:
        assert exc.status == 404
        return None


def test_run_reaches_the_controller_which_admits_and_pins_a_pod_to_its_card(
    cluster: Cluster,
    fresh_fleet: client.ApiClient,
    controller_process: subprocess.Popen[str],
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 2, small("m1"))
    cli = Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )
    done = cli("run", "qwen", "--name", "chat", "--wait", "60", "--json", *UNPROVED)
    assert done.returncode == 0, done.stderr + (tmp_path / "controller.log").read_text()
    started = json.loads(done.stdout)
    card = gpu_uuid("m1", 0)
    assert (started["workload"]["machine"], started["workload"]["gpu"]) == ("m1", card)
    assert started["source"] == "estimated" and started["reserved_bytes"] > 0

    pod = pod_of(api, "chat")
    assert pod is not None, "the controller made no model-server Pod"
    assert pod.spec.node_name == "m1"
    [container] = pod.spec.containers
    assert {e.name: e.value for e in container.env}["NVIDIA_VISIBLE_DEVICES"] == card

    def serving() -> bool:
        rows = cli.json("ps")
        assert isinstance(rows, list)
        return [(row["name"], row["state"]) for row in rows] == [("chat", "serving")]

    wait_for(serving, "KWOK runs the Pod and the controller records the service serving")
    [row] = cli.json("ps")  # type: ignore[misc]
    assert row["machine"] == "m1" and row["gpu"] == card
    assert row["sentence"].startswith("serving on m1 (GPU-m1-0…) since ")
    assert row["endpoint"] == started["workload"]["endpoint"]  # the loopback address run gave
    assert row["endpoint"].startswith("http://127.0.0.1:")
    assert controller_process.poll() is None  # it kept running: nothing it did was refused
