"""The fleet's entitlement store: ConfigMap nodeau-entitlement in nodeau-system.

Why it is so: docs/adr/decisions/adapters-kube.md (entitlement.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict
from nodeau.adapters.kube.config_maps import read_config_map, write_config_map
from nodeau.domain.entitlements import newest_seen
from nodeau.ports.cluster import ClusterError
from nodeau.ports.entitlements import StoredEntitlement, installation_id_problem

WHERE = f"ConfigMap {r.NAMESPACE}/{r.ENTITLEMENT_CONFIGMAP}"
_ATTEMPTS = 8

Data = dict[str, str]


def _anchor_of(data: Data) -> datetime | None:
    text = data.get(r.ANCHOR_KEY)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ClusterError(f"{WHERE} key {r.ANCHOR_KEY} is not an ISO 8601 moment ({exc})") from exc
    if moment.utcoffset() is None:
        raise ClusterError(f"{WHERE} key {r.ANCHOR_KEY} has no UTC offset")
    return moment


def _with_id(data: Data) -> Data:
    """``data`` with an installation id: the one kept, checked, or a new one."""
    kept = data.get(r.INSTALLATION_KEY)
    if kept is None:
        return {**data, r.INSTALLATION_KEY: secrets.token_hex(16)}
    problem = installation_id_problem(kept)
    if problem is not None:
        raise ClusterError(f"{WHERE} key {r.INSTALLATION_KEY} {problem}")
    return data


def _advanced(data: Data, seen: datetime) -> Data:
    kept = _anchor_of(data)
    newest = newest_seen(kept, seen)
    return data if newest == kept else {**data, r.ANCHOR_KEY: newest.isoformat()}


def _stored(data: Data) -> StoredEntitlement:
    document = data.get(r.ENTITLEMENT_KEY)
    return StoredEntitlement(
        installation_id=data[r.INSTALLATION_KEY],
        document=None if document is None else document.encode("utf-8"),
        anchor=_anchor_of(data),
        where=f"{WHERE} key {r.ENTITLEMENT_KEY}",
    )


class KubeEntitlementStore:
    """``EntitlementStore`` on ConfigMap ``nodeau-entitlement``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def _change(self, change: Callable[[Data], Data]) -> Data:
        """Apply ``change`` (after making the id) under the version read; the data kept."""
        for _ in range(_ATTEMPTS):
            found = read_config_map(self._api, r.ENTITLEMENT_CONFIGMAP, "read the entitlement")
            data, version = ({}, None) if found is None else found
            changed = change(_with_id(data))
            if changed == data:
                return data
            try:
                write_config_map(
                    self._api, r.ENTITLEMENT_CONFIGMAP, changed, version, "write the entitlement"
                )
            except Conflict:
                continue
            return changed
        raise ClusterError(f"cannot write {WHERE}: it changed under {_ATTEMPTS} writes in a row")

    def read(self) -> StoredEntitlement:
        return _stored(self._change(lambda d: d))

    def kept(self) -> StoredEntitlement | None:
        """``KeptEntitlement``: what the ConfigMap holds, read only (the controller's view)."""
        found = read_config_map(self._api, r.ENTITLEMENT_CONFIGMAP, "read the entitlement")
        if found is None or r.INSTALLATION_KEY not in found[0]:
            return None
        return _stored(_with_id(found[0]))

    def install(self, document: bytes, seen: datetime) -> None:
        try:
            text = document.decode("utf-8")
        except UnicodeDecodeError as exc:  # a verified document is UTF-8 JSON
            raise ClusterError(f"cannot keep the entitlement in {WHERE}: not UTF-8") from exc
        self._change(lambda d: _advanced({**d, r.ENTITLEMENT_KEY: text}, seen))

    def remove(self, seen: datetime) -> bool:
        had: list[bool] = []

        def without(data: Data) -> Data:
            had[:] = [r.ENTITLEMENT_KEY in data]
            rest = {k: v for k, v in data.items() if k != r.ENTITLEMENT_KEY}
            return _advanced(rest, seen)

        self._change(without)
        return bool(had and had[0])

    def advance_anchor(self, seen: datetime) -> None:
        self._change(lambda d: _advanced(d, seen))
