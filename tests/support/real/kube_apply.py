"""Applying deploy/ manifests to a test API server as ``kubectl apply --server-side`` would.

Forced server-side apply (field manager ``nodeau-tests``) is idempotent and takes over objects
without a conflict; a CRD is waited for until established, so a later document may use it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from tests.support.real.kube_cluster import Cluster

FIELD_MANAGER = "nodeau-tests"
DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
# every manifest, in the order kubectl apply -f deploy/ applies them
MANIFESTS = tuple(sorted(DEPLOY.glob("*.yaml")))
ESTABLISHED_TIMEOUT_S = 30.0


def manifest_documents(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every non-empty YAML document of the files, in order."""
    for path in paths:
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield document


def apply_manifests(api: Any, paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Server-side apply every document of ``paths`` in order; the objects as the server keeps them.

    ``api`` is a ``kubernetes.client.ApiClient``. Namespaced documents must name their
    namespace. Discovery is cached in a temporary directory removed afterwards.
    """
    applied: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="nodeau-discovery-") as cache:
        dynamic = DynamicClient(api, cache_file=str(Path(cache) / "discovery.json"))  # type: ignore[no-untyped-call]
        for document in manifest_documents(paths):
            resource = dynamic.resources.get(
                api_version=document["apiVersion"], kind=document["kind"]
            )
            metadata = document["metadata"]
            namespace = metadata.get("namespace") if resource.namespaced else None
            if resource.namespaced and not namespace:
                raise ValueError(f"{document['kind']} {metadata['name']} names no namespace")
            result = resource.server_side_apply(
                body=document,
                name=metadata["name"],
                namespace=namespace,
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
            applied.append(result.to_dict())
            if document["kind"] == "CustomResourceDefinition":
                wait_established(api, metadata["name"])
    return applied


def wait_established(api: Any, name: str, timeout_s: float = ESTABLISHED_TIMEOUT_S) -> None:
    """Wait until the CRD ``name`` says Established=True (its API is served)."""
    extensions = client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        crd: Any = extensions.read_custom_resource_definition(name)
        conditions = crd.status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise AssertionError(f"CRD {name} not established within {timeout_s} s")


def service_account_token(api: Any, namespace: str, name: str, audience: str) -> str:
    """A short-lived token for a ServiceAccount, issued through the TokenRequest API."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[audience], expiration_seconds=600)
    )
    issued: Any = client.CoreV1Api(api).create_namespaced_service_account_token(
        name, namespace, request
    )
    token: str = issued.status.token
    return token


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
