"""Nodeau's own ConfigMaps in nodeau-system (the ledger, the copy requests): each written
whole, under the resourceVersion it was read at, so two writers never lose a change.

Why it is so: docs/adr/decisions/adapters-kube.md (config_maps.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, NotFound, api_errors, or_none


def read_config_map(api: Any, name: str, what: str) -> tuple[dict[str, str], str] | None:
    """ConfigMap ``name``'s data and the resourceVersion it was read at; None when there is
    none yet. ``what`` names the read in errors."""
    core: Any = client.CoreV1Api(api)
    found = or_none(
        what,
        lambda: core.read_namespaced_config_map(
            name, r.NAMESPACE, _request_timeout=REQUEST_TIMEOUT
        ),
    )
    if found is None:
        return None
    return dict(found.data or {}), str(found.metadata.resource_version)


def write_config_map(
    api: Any, name: str, data: Mapping[str, str], version: str | None, what: str
) -> None:
    """Create ConfigMap ``name`` with ``data`` (``version`` None), or replace the one read
    at ``version``; ``what`` names the write in errors."""
    core: Any = client.CoreV1Api(api)  # Any: plain dict bodies, not the client's models
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": r.NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "nodeau"},
        },
        "data": dict(data),
    }
    if version is None:
        with api_errors(what):
            core.create_namespaced_config_map(r.NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT)
        return
    body["metadata"]["resourceVersion"] = version
    try:
        with api_errors(what):
            core.replace_namespaced_config_map(
                name, r.NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT
            )
    except NotFound as exc:  # deleted since it was read: read again, like any change
        raise Conflict(what, exc.status, exc.message) from exc
