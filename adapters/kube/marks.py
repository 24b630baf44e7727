"""A person's marks on the fleet, kept in the cluster: drained, upgrading, scheduling policy.

Why it is so: docs/adr/decisions/adapters-kube.md (marks.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, NotFound, api_errors, or_none
from nodeau.domain.fleet_reports import MarkedFleet
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.ports.cluster import UnknownMachine

__all__ = ["KubeFleetMarks", "MarkedFleet", "UnknownMachine"]

TRUE = "true"


def _core(api: Any) -> Any:
    return client.CoreV1Api(api)


def _policy(value: object) -> Policy | None:
    return Policy(value) if value in {p.value for p in Policy} else None


def read_marks(api: Any) -> MarkedFleet:
    """The marks as the cluster holds them now (Node labels and the scheduling ConfigMap)."""
    with api_errors("list the Nodes"):
        listed = _core(api).list_node(_request_timeout=REQUEST_TIMEOUT, _preload_content=False)
        nodes: list[dict[str, Any]] = json.loads(listed.data)["items"]  # as plain JSON: fast
    labels: dict[str, dict[str, str]] = {
        n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in nodes
    }
    overrides = tuple(
        sorted(
            (name, policy)
            for name, held in labels.items()
            if (policy := _policy(held.get(r.POLICY_LABEL))) is not None
        )
    )
    return MarkedFleet(
        nodes=tuple(sorted(labels)),
        drained=frozenset(n for n, held in labels.items() if held.get(r.DRAINED_LABEL) == TRUE),
        upgrading=frozenset(n for n, held in labels.items() if held.get(r.UPGRADING_LABEL) == TRUE),
        control_plane=frozenset(n for n, held in labels.items() if r.CONTROL_PLANE_LABEL in held),
        settings=SchedulingSettings(
            fleet_policy=_policy(_fleet_policy_value(api)) or Policy.PACK, overrides=overrides
        ),
    )


def _fleet_policy_value(api: Any) -> str | None:
    held = or_none(
        f"read ConfigMap {r.SCHEDULING_CONFIGMAP}",
        lambda: _core(api).read_namespaced_config_map(
            r.SCHEDULING_CONFIGMAP, r.NAMESPACE, _request_timeout=REQUEST_TIMEOUT
        ),
    )
    return None if held is None else (held.data or {}).get(r.POLICY_KEY)


def _patch_node(api: Any, node: str, labels: dict[str, Any], annotations: dict[str, Any]) -> None:
    body = {"metadata": {"labels": labels, "annotations": annotations}}
    try:
        with api_errors(f"mark Node {node}"):
            _core(api).patch_node(node, body, _request_timeout=REQUEST_TIMEOUT)
    except NotFound as exc:
        raise UnknownMachine.named(node) from exc


def write_drained(api: Any, node: str, at: datetime | None) -> None:
    """Label a Node drained, and when as an annotation (None: take both off)."""
    drained, since = (TRUE, at.isoformat()) if at is not None else (None, None)
    _patch_node(api, node, {r.DRAINED_LABEL: drained}, {r.DRAINED_AT_ANNOTATION: since})


def write_upgrading(api: Any, node: str, upgrading: bool) -> None:
    """Label a Node upgrading, or take the label off."""
    _patch_node(api, node, {r.UPGRADING_LABEL: TRUE if upgrading else None}, {})


def write_policy(api: Any, policy: Policy, node: str | None = None) -> None:
    """Set the fleet-wide policy (ConfigMap, created when absent) or one Node's override."""
    if node is not None:
        _patch_node(api, node, {r.POLICY_LABEL: policy.value}, {})
    else:
        _write_fleet_policy(api, policy)


def _write_fleet_policy(api: Any, policy: Policy) -> None:
    core = _core(api)
    data = {r.POLICY_KEY: policy.value}
    what = f"write ConfigMap {r.SCHEDULING_CONFIGMAP}"
    try:
        with api_errors(what):
            core.patch_namespaced_config_map(
                r.SCHEDULING_CONFIGMAP,
                r.NAMESPACE,
                {"data": data},
                _request_timeout=REQUEST_TIMEOUT,
            )
        return
    except NotFound:
        pass
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": r.SCHEDULING_CONFIGMAP,
            "namespace": r.NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "nodeau"},
        },
        "data": data,
    }
    try:
        with api_errors(what):
            core.create_namespaced_config_map(r.NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT)
    except Conflict:
        # someone created it between our two calls: ours is the newer choice
        with api_errors(what):
            core.patch_namespaced_config_map(
                r.SCHEDULING_CONFIGMAP,
                r.NAMESPACE,
                {"data": data},
                _request_timeout=REQUEST_TIMEOUT,
            )


class KubeFleetMarks:
    """``ports.cluster.FleetMarks`` on Node labels and ConfigMap ``nodeau-scheduling``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def read(self) -> MarkedFleet:
        return read_marks(self._api)

    def write_drained(self, machine: str, at: datetime | None) -> None:
        write_drained(self._api, machine, at)

    def write_upgrading(self, machine: str, upgrading: bool) -> None:
        write_upgrading(self._api, machine, upgrading)

    def write_policy(self, policy: Policy, machine: str | None = None) -> None:
        write_policy(self._api, policy, machine)
