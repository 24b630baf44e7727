"""deploy/ on a real API server: every manifest applies (twice), the CRDs validate and default
as the ADR says, status is a subresource, the printer columns show the status, and RBAC gives
the controller and the agent what they need and nothing else (proved with their own tokens).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.kube import resources as r
from tests.support.real.kube_apply import MANIFESTS, apply_manifests, manifest_documents
from tests.support.real.kube_cluster import Cluster

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def gpuservice(name: str = "chat", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": r.API_VERSION,
        "kind": r.GPUSERVICE_KIND,
        "metadata": {"name": name, "namespace": r.NAMESPACE},
        "spec": {"model": "qwen2.5-0.5b-instruct", **spec},
    }


def batchjob(name: str = "nightly") -> dict[str, Any]:
    request = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}
    return {
        "apiVersion": r.API_VERSION,
        "kind": r.BATCHJOB_KIND,
        "metadata": {"name": name, "namespace": r.NAMESPACE},
        "spec": {"model": "qwen2.5-0.5b-instruct", "requests": [request]},
    }


def condition(status: str) -> dict[str, str]:
    return {
        "type": "Admitted", "status": status, "reason": "Capacity",
        "message": "fits", "lastTransitionTime": "2026-12-01T10:00:00Z",
    }  # fmt: skip


def custom(api: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create(api: Any, body: dict[str, Any]) -> dict[str, Any]:
    plural = r.GPUSERVICES if body["kind"] == r.GPUSERVICE_KIND else r.BATCHJOBS
    created: Any = custom(api).create_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, plural, body
    )
    return dict(created)


def write_status(api: Any, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    plural = r.GPUSERVICES if obj["kind"] == r.GPUSERVICE_KIND else r.BATCHJOBS
    body = {**obj, "status": status}
    written: Any = custom(api).replace_namespaced_custom_object_status(
        r.GROUP, r.VERSION, r.NAMESPACE, plural, obj["metadata"]["name"], body
    )
    return dict(written)


@pytest.fixture(scope="module")
def deployed(cluster: Cluster) -> Iterator[list[dict[str, Any]]]:
    """Every manifest in deploy/ applied once, as ``kubectl apply -f deploy/`` would."""
    admin: Any = config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
    with admin as api:
        yield apply_manifests(api, MANIFESTS)


def test_every_manifest_is_accepted_and_applying_again_changes_nothing(
    deployed: list[dict[str, Any]], kube: client.ApiClient
) -> None:
    documents = list(manifest_documents(MANIFESTS))
    assert [(o["kind"], o["metadata"]["name"]) for o in deployed] == [
        (d["kind"], d["metadata"]["name"]) for d in documents
    ]
    again = apply_manifests(kube, MANIFESTS)
    assert [o["metadata"]["resourceVersion"] for o in again] == [
        o["metadata"]["resourceVersion"] for o in deployed
    ]
    apps = client.AppsV1Api(kube)
    controller: Any = apps.read_namespaced_deployment("nodeau-controller", r.NAMESPACE).spec
    agent: Any = apps.read_namespaced_daemon_set("nodeau-agent", r.NAMESPACE).spec
    assert controller.replicas == 2  # a leader and a standby (docs/adr/0015)
    assert controller.template.spec.service_account_name == "nodeau-controller"
    assert agent.template.spec.service_account_name == "nodeau-agent"
    for pod in (controller.template.spec, agent.template.spec):
        assert pod.security_context.run_as_non_root is True
        (container,) = pod.containers
        assert container.security_context.read_only_root_filesystem is True
        assert container.security_context.allow_privilege_escalation is False
        assert container.resources.requests and container.resources.limits
    preferred = controller.template.spec.affinity.node_affinity
    terms = preferred.preferred_during_scheduling_ignored_during_execution
    assert terms[0].preference.match_expressions[0].key == r.CONTROL_PLANE_LABEL
    (container,) = agent.template.spec.containers
    assert container.command == ["python", "-m", "nodeau.apps.agent"]
    env = {e.name: e for e in container.env}
    assert env["NODE_NAME"].value_from.field_ref.field_path == "spec.nodeName"
    assert env["NVIDIA_VISIBLE_DEVICES"].value == "all"
    (store,) = [m for m in container.volume_mounts if m.mount_path == "/var/lib/nodeau"]
    assert env["NODEAU_HOME"].value == "/var/lib/nodeau"
    assert not store.read_only  # the agent fetches the copies asked of its machine into it
    assert [t.operator for t in agent.template.spec.tolerations] == ["Exists"]


def test_valid_objects_are_accepted_with_the_defaults_filled(fresh_fleet: client.ApiClient) -> None:
    service = create(fresh_fleet, gpuservice())["spec"]
    job = create(fresh_fleet, batchjob())["spec"]
    assert service == {
        "model": "qwen2.5-0.5b-instruct", "task": "chat", "recovery": "never",
        "recoveryAfterSeconds": 180, "endpoint": "serving",
    }  # fmt: skip
    assert job["task"] == "chat"
    assert set(job) == {"model", "task", "requests"}


def _without_model(body: dict[str, Any]) -> None:
    del body["spec"]["model"]


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


Change = Callable[[dict[str, Any]], None]
INVALID: dict[str, tuple[Callable[[], dict[str, Any]], Change, str]] = {
    "missing model": (gpuservice, _without_model, "spec.model"),
    "task dance": (gpuservice, _set(("spec", "task"), "dance"), "spec.task"),
    "contextTokens 0": (gpuservice, _set(("spec", "contextTokens"), 0), "spec.contextTokens"),
    "request GET": (
        batchjob,
        _set(("spec", "requests", 0, "method"), "GET"),
        "spec.requests[0].method",
    ),
    "recovery sometimes": (gpuservice, _set(("spec", "recovery"), "sometimes"), "spec.recovery"),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_an_invalid_object_is_refused_naming_the_field(
    fresh_fleet: client.ApiClient, case: str
) -> None:
    make, change, field = INVALID[case]
    body = make()
    change(body)
    with pytest.raises(ApiException) as refused:
        create(fresh_fleet, body)
    assert refused.value.status == 422
    assert field in str(refused.value.body)


@pytest.mark.parametrize("make", [gpuservice, batchjob], ids=["gpuservice", "batchjob"])
def test_a_condition_with_a_bad_status_is_refused_naming_the_field(
    fresh_fleet: client.ApiClient, make: Callable[[], dict[str, Any]]
) -> None:
    created = create(fresh_fleet, make())
    good = write_status(fresh_fleet, created, {"conditions": [condition("True")]})
    with pytest.raises(ApiException) as refused:
        write_status(fresh_fleet, good, {"conditions": [condition("Maybe")]})
    assert refused.value.status == 422
    assert "status.conditions[0].status" in str(refused.value.body)


def test_status_is_a_subresource_apart_from_spec(fresh_fleet: client.ApiClient) -> None:
    created = create(fresh_fleet, gpuservice())
    status = {"state": "serving", "machine": "garage", "conditions": [condition("True")]}
    written = write_status(fresh_fleet, created, status)
    assert written["status"] == status
    assert written["metadata"]["generation"] == created["metadata"]["generation"]

    changed = copy.deepcopy(written)
    changed["spec"]["endpoint"] = "stopped"
    changed["status"] = {"state": "refused"}
    replaced: Any = custom(fresh_fleet).replace_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "chat", changed
    )
    assert replaced["spec"]["endpoint"] == "stopped"
    assert replaced["status"] == status
    assert replaced["metadata"]["generation"] == written["metadata"]["generation"] + 1

    sneaky = copy.deepcopy(replaced)
    sneaky["spec"]["model"] = "something-else"
    after = write_status(fresh_fleet, sneaky, {**status, "state": "stopped"})
    assert after["spec"] == replaced["spec"]
    assert after["status"]["state"] == "stopped"
    assert after["metadata"]["generation"] == replaced["metadata"]["generation"]


def test_the_printer_columns_show_the_status(
    cluster: Cluster, fresh_fleet: client.ApiClient
) -> None:
    created = create(fresh_fleet, gpuservice())
    status = {
        "state": "serving", "machine": "garage", "gpuUUID": "GPU-3f2a",
        "endpoint": "http://10.240.0.7:8080",
    }  # fmt: skip
    obj = write_status(fresh_fleet, created, status)
    path = f"/apis/{r.API_VERSION}/namespaces/{r.NAMESPACE}/{r.GPUSERVICES}"
    with cluster.http() as http:
        table = http.get(path, headers={"Accept": TABLE})
    assert table.status_code == 200
    body = table.json()
    assert body["kind"] == "Table"
    names = [c["name"] for c in body["columnDefinitions"]]
    assert names == ["Name", "Model", "Machine", "GPU", "State", "Endpoint", "Age"]
    (row,) = body["rows"]
    assert row["cells"][:6] == [
        obj["metadata"]["name"], obj["spec"]["model"], obj["status"]["machine"],
        obj["status"]["gpuUUID"], obj["status"]["state"], obj["status"]["endpoint"],
    ]  # fmt: skip
    assert re.fullmatch(r"\d+[smhd].*", row["cells"][6])
