"""A person's marks on the fleet, kept in the cluster: drained, upgrading, scheduling policy.

Decisions recorded here:

* A mark is a label (and, for drain, an annotation saying when) on the Node, or
  the fleet-wide policy in ConfigMap ``nodeau-scheduling``; see ADR 0004. What a
  change means, and the sentence that says so, is the domain's
  (``scheduling.drain``, ``undrain``, ``change_fleet_policy``,
  ``set_machine_policy``); this module only reads and writes the marks.
* Marking never touches a Pod, a GPUService or a BatchJob: a drain stops new
  placements and stops, moves and restarts nothing.
* "Running workloads" in the sentences are the reservations in the ledger
  ConfigMap (the authority for what each card holds).
* A policy label or ConfigMap value that is neither ``pack`` nor ``spread``
  (someone's hand edit) is ignored: the machine follows the fleet policy, and
  the fleet policy falls back to the domain's default.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from attrs import frozen
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.record_json import RecordError, from_plain
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import (
    DrainChange,
    SettingsChange,
    change_fleet_policy,
    set_machine_policy,
)
from nodeau.domain.scheduling import drain as drain_change
from nodeau.domain.scheduling import undrain as undrain_change
from nodeau.ports.state import StateError

TRUE = "true"


class UnknownMachine(StateError):
    """No Node by that name in the cluster."""


@frozen(kw_only=True)
class FleetMarks:
    """Every Node, the marks on them, and the scheduling settings they add up to."""

    nodes: tuple[str, ...]
    drained: frozenset[str]
    upgrading: frozenset[str]
    control_plane: frozenset[str]
    settings: SchedulingSettings


def _core(api: Any) -> Any:
    return client.CoreV1Api(api)


def _policy(value: object) -> Policy | None:
    return Policy(value) if value in {p.value for p in Policy} else None


def read_marks(api: Any) -> FleetMarks:
    """The marks as the cluster holds them now (Node labels and the scheduling ConfigMap)."""
    nodes: list[Any] = _core(api).list_node().items
    labels: dict[str, dict[str, str]] = {
        n.metadata.name: dict(n.metadata.labels or {}) for n in nodes
    }
    overrides = tuple(
        sorted(
            (name, policy)
            for name, held in labels.items()
            if (policy := _policy(held.get(r.POLICY_LABEL))) is not None
        )
    )
    return FleetMarks(
        nodes=tuple(sorted(labels)),
        drained=frozenset(n for n, held in labels.items() if held.get(r.DRAINED_LABEL) == TRUE),
        upgrading=frozenset(n for n, held in labels.items() if held.get(r.UPGRADING_LABEL) == TRUE),
        control_plane=frozenset(n for n, held in labels.items() if r.CONTROL_PLANE_LABEL in held),
        settings=SchedulingSettings(
            fleet_policy=_policy(_fleet_policy_value(api)) or Policy.PACK, overrides=overrides
        ),
    )


def _fleet_policy_value(api: Any) -> str | None:
    try:
        held = _core(api).read_namespaced_config_map(r.SCHEDULING_CONFIGMAP, r.NAMESPACE)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return (held.data or {}).get(r.POLICY_KEY)


def read_ledger(api: Any) -> Ledger:
    """The reservation ledger (ConfigMap ``nodeau-ledger``); empty when there is none yet."""
    try:
        held = _core(api).read_namespaced_config_map(r.LEDGER_CONFIGMAP, r.NAMESPACE)
    except client.ApiException as exc:
        if exc.status == 404:
            return Ledger()
        raise
    text = (held.data or {}).get(r.LEDGER_KEY)
    if not text:
        return Ledger()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"the reservation ledger is not JSON: {exc.msg}") from exc
    return Ledger(reservations=from_plain(raw, tuple[Reservation, ...], "the reservation ledger"))


def _known(marks: FleetMarks, node: str) -> None:
    if node not in marks.nodes:
        raise UnknownMachine(
            f"no machine called {node!r} in the cluster; nodeau fleet list lists them"
        )


def _patch_node(api: Any, node: str, labels: dict[str, Any], annotations: dict[str, Any]) -> None:
    body = {"metadata": {"labels": labels, "annotations": annotations}}
    _core(api).patch_node(node, body)


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
    try:
        core.patch_namespaced_config_map(r.SCHEDULING_CONFIGMAP, r.NAMESPACE, {"data": data})
        return
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(
            name=r.SCHEDULING_CONFIGMAP,
            namespace=r.NAMESPACE,
            labels={"app.kubernetes.io/part-of": "nodeau"},
        ),
        data=data,
    )
    try:
        core.create_namespaced_config_map(r.NAMESPACE, body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        # someone created it between our two calls: ours is the newer choice
        core.patch_namespaced_config_map(r.SCHEDULING_CONFIGMAP, r.NAMESPACE, {"data": data})
