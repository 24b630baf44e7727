"""The key of a workload's model server on the fleet: a Secret the controller creates.

Why it is so: docs/adr/decisions/adapters-kube.md (server_keys.py).
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict, api_errors, or_none, send_json

FIELD = "api-key"
SERVER_VARIABLE = "LLAMA_API_KEY"  # what llama-server reads its key from
WORKER_VARIABLE = "NODEAU_SERVER_KEY"  # what a batch job's worker sends


def key_name(kind_label: str, workload: str) -> str:
    """The Secret holding the key of a workload's model server."""
    return f"{r.server_pod_name(kind_label, workload)}-key"


def key_manifest(kind_label: str, workload: str, owner: dict[str, Any]) -> dict[str, Any]:
    """A Secret with a new random key, owned by the workload's object (``owner``: its
    owner reference), so it goes when the workload does."""
    key = secrets.token_urlsafe(32)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": key_name(kind_label, workload),
            "namespace": r.NAMESPACE,
            "labels": {
                r.WORKLOAD_LABEL: workload,
                r.KIND_LABEL: kind_label,
                "app.kubernetes.io/part-of": "nodeau",
                "app.kubernetes.io/managed-by": r.CONTROLLER_COMPONENT,
            },
            "ownerReferences": [owner],
        },
        "data": {FIELD: base64.b64encode(key.encode()).decode()},
    }


def create_key(api: Any, manifest: dict[str, Any]) -> bool:
    """Create the Secret; False when it exists already (a recovery's Pod keeps the key)."""
    name = manifest["metadata"]["name"]
    try:
        with api_errors(f"create Secret {name}"):
            send_json(
                api, "POST", "/api/v1/namespaces/{namespace}/secrets", {"namespace": r.NAMESPACE},
                manifest,
            )  # fmt: skip
    except Conflict:
        return False
    return True


def key_env(variable: str, kind_label: str, workload: str) -> dict[str, Any]:
    """A container's environment variable holding the key."""
    ref = {"name": key_name(kind_label, workload), "key": FIELD}
    return {"name": variable, "valueFrom": {"secretKeyRef": ref}}


def read_key(api: Any, kind_label: str, workload: str) -> str | None:
    """The key of the workload's model server; None when it has none (yet)."""
    name = key_name(kind_label, workload)
    secret = or_none(
        f"read Secret {name} (the key of {workload}'s model server)",
        lambda: client.CoreV1Api(api).read_namespaced_secret(name, r.NAMESPACE),
    )
    if secret is None or not secret.data or FIELD not in secret.data:
        return None
    return base64.b64decode(secret.data[FIELD]).decode()
