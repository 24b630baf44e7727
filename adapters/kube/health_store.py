"""Machine health as the controller last assessed it: ConfigMap nodeau-health, one key per machine.

Why it is so: docs/adr/decisions/adapters-kube.md (health_store.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors, or_none
from nodeau.adapters.record_json import RecordError, loads, to_plain
from nodeau.domain.health import MachineHealth
from nodeau.ports.cluster import ClusterError

_ATTEMPTS = 5


def _core(api: Any) -> Any:
    return client.CoreV1Api(api)


def _read(api: Any) -> Any | None:
    return or_none(
        f"read ConfigMap {r.HEALTH_CONFIGMAP}",
        lambda: _core(api).read_namespaced_config_map(
            r.HEALTH_CONFIGMAP, r.NAMESPACE, _request_timeout=REQUEST_TIMEOUT
        ),
    )


def encode(health: MachineHealth) -> str:
    """One machine's health as its key's text (the quiet signals as a sorted list)."""
    return json.dumps(to_plain(health, MachineHealth), default=_listed, sort_keys=True)


def _listed(value: object) -> list[Any]:
    if isinstance(value, frozenset | set):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def decode(data: Mapping[str, str]) -> dict[str, MachineHealth]:
    """The readable entries of the ConfigMap's data."""
    out: dict[str, MachineHealth] = {}
    for machine, text in data.items():
        try:
            out[machine] = loads(text, MachineHealth, f"health of {machine}")
        except RecordError:
            continue
    return out


def read_health(api: Any) -> Mapping[str, MachineHealth]:
    """Each machine's last assessed health; empty before the first assessment."""
    found = _read(api)
    return {} if found is None else decode(found.data or {})


def write_health(api: Any, health: Mapping[str, MachineHealth]) -> None:
    """Record the fleet's health (exactly these machines)."""
    core = _core(api)
    data = {machine: encode(h) for machine, h in sorted(health.items())}
    for _ in range(_ATTEMPTS):
        found = _read(api)
        try:
            with api_errors(f"write ConfigMap {r.HEALTH_CONFIGMAP}"):
                _write(core, found, data)
            return
        except Conflict:
            continue
    raise ClusterError(
        f"cannot write ConfigMap {r.HEALTH_CONFIGMAP}: it changed under {_ATTEMPTS} writes in a row"
    )


def _write(core: Any, found: Any | None, data: dict[str, str]) -> None:
    """Create the ConfigMap, or replace it under the version read (unless it says this already)."""
    if found is None:
        body = {"metadata": {"name": r.HEALTH_CONFIGMAP, "namespace": r.NAMESPACE}, "data": data}
        core.create_namespaced_config_map(r.NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT)
    elif dict(found.data or {}) != data:
        found.data = data
        core.replace_namespaced_config_map(
            r.HEALTH_CONFIGMAP, r.NAMESPACE, found, _request_timeout=REQUEST_TIMEOUT
        )


class KubeHealthRecords:
    """``ports.cluster.HealthRecords`` on ConfigMap ``nodeau-health``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def read(self) -> Mapping[str, MachineHealth]:
        return read_health(self._api)

    def write(self, health: Mapping[str, MachineHealth]) -> None:
        write_health(self._api, health)
