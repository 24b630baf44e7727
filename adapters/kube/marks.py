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
from nodeau.adapters.kube.ledger import read_ledger as read_ledger_configmap
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.reservations import Ledger
from nodeau.domain.scheduling import (
    DrainChange,
    SettingsChange,
    UpgradeChange,
    change_fleet_policy,
    set_machine_policy,
)
from nodeau.domain.scheduling import clear_upgrading as clear_upgrading_change
from nodeau.domain.scheduling import drain as drain_change
from nodeau.domain.scheduling import mark_upgrading as mark_upgrading_change
from nodeau.domain.scheduling import undrain as undrain_change
from nodeau.ports.cluster import MarkedFleet, UnknownMachine

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


def read_ledger(api: Any) -> Ledger:
    """The reservation ledger (the Reservation objects, one per card held; docs/adr/0017)."""
    return Ledger(reservations=read_ledger_configmap(api).reservations)


def _known(marks: MarkedFleet, node: str) -> None:
    if node not in marks.nodes:
        raise UnknownMachine(
            f"no machine called {node!r} in the cluster; nodeau fleet list lists them"
        )


def _patch_node(api: Any, node: str, labels: dict[str, Any], annotations: dict[str, Any]) -> None:
    body = {"metadata": {"labels": labels, "annotations": annotations}}
    with api_errors(f"mark Node {node}"):
        _core(api).patch_node(node, body, _request_timeout=REQUEST_TIMEOUT)


def drain(api: Any, node: str, at: datetime) -> DrainChange:
    """Mark a Node drained (label, and when as an annotation); nothing on it is disturbed."""
    marks = read_marks(api)
    _known(marks, node)
    running = len(read_ledger(api).on_machine(node))
    change = drain_change(marks.drained, node, running)
    _patch_node(api, node, {r.DRAINED_LABEL: TRUE}, {r.DRAINED_AT_ANNOTATION: at.isoformat()})
    return change


def undrain(api: Any, node: str) -> DrainChange:
    """Remove the drained mark from a Node; nothing is moved back to it."""
    marks = read_marks(api)
    _known(marks, node)
    change = undrain_change(marks.drained, node)
    _patch_node(api, node, {r.DRAINED_LABEL: None}, {r.DRAINED_AT_ANNOTATION: None})
    return change


def mark_upgrading(api: Any, node: str) -> UpgradeChange:
    """Label a Node upgrading; the controller moves nothing on it while the label holds."""
    marks = read_marks(api)
    _known(marks, node)
    running = len(read_ledger(api).on_machine(node))
    change = mark_upgrading_change(marks.upgrading, node, running, alone=False)
    _patch_node(api, node, {r.UPGRADING_LABEL: TRUE}, {})
    return change


def clear_upgrading(api: Any, node: str) -> UpgradeChange:
    """Remove a Node's upgrading label; nothing moves because of it."""
    marks = read_marks(api)
    _known(marks, node)
    change = clear_upgrading_change(marks.upgrading, node, alone=False)
    _patch_node(api, node, {r.UPGRADING_LABEL: None}, {})
    return change


def set_policy(api: Any, policy: Policy, node: str | None = None) -> SettingsChange:
    """Set the fleet-wide policy (ConfigMap, created when absent) or one Node's override."""
    marks = read_marks(api)
    ledger = read_ledger(api)
    if node is not None:
        _known(marks, node)
        change = set_machine_policy(marks.settings, node, policy, len(ledger.on_machine(node)))
        _patch_node(api, node, {r.POLICY_LABEL: policy.value}, {})
        return change
    change = change_fleet_policy(marks.settings, policy, len(ledger.reservations))
    _write_fleet_policy(api, policy)
    return change


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

    def drain(self, machine: str, at: datetime) -> DrainChange:
        return drain(self._api, machine, at)

    def undrain(self, machine: str) -> DrainChange:
        return undrain(self._api, machine)

    def set_policy(self, policy: Policy, machine: str | None = None) -> SettingsChange:
        return set_policy(self._api, policy, machine)

    def mark_upgrading(self, machine: str) -> UpgradeChange:
        return mark_upgrading(self._api, machine)

    def clear_upgrading(self, machine: str) -> UpgradeChange:
        return clear_upgrading(self._api, machine)
