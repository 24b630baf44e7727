"""Copy requests in the cluster: ConfigMap nodeau-copies, replaced under its resourceVersion.

Why it is so: docs/adr/decisions/adapters-kube.md (copies.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from attrs import frozen

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict
from nodeau.adapters.kube.config_maps import read_config_map, write_config_map
from nodeau.adapters.record_json import RecordError, from_plain, to_plain
from nodeau.domain.copies import CopyRequest, find_request, with_ask, without_ask
from nodeau.ports.cluster import ClusterError

WHERE = f"ConfigMap {r.NAMESPACE}/{r.COPIES_CONFIGMAP}"
_ATTEMPTS = 8

Requests = tuple[CopyRequest, ...]


@frozen(kw_only=True)
class CopiesRead:
    """The requests as read, and the version a write must name to replace them."""

    requests: Requests
    version: str | None  # None: there is no ConfigMap yet


def text_of(requests: Requests) -> str:
    """The key's JSON text: requests by machine then artifact."""
    ordered = tuple(sorted(requests, key=lambda x: x.key))
    return json.dumps(to_plain(ordered, Requests), sort_keys=True)


def parse(text: str) -> Requests:
    """Requests from the key's text; ClusterError naming the ConfigMap if it does not read."""
    what = f"{WHERE} key {r.COPIES_KEY}"
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ClusterError(f"{what} is not JSON ({exc}); fix or delete it") from exc
    if not isinstance(raw, list):
        raise ClusterError(f"{what} is not a list of copy requests; fix or delete it")
    try:
        found = from_plain(raw, Requests, what)
    except RecordError as exc:
        raise ClusterError(f"{' '.join(str(exc).split())}; fix or delete it") from exc
    return tuple(sorted(found, key=lambda x: x.key))


def read_copies(api: Any) -> CopiesRead:
    """The requests as they are now."""
    found = read_config_map(api, r.COPIES_CONFIGMAP, "read the copy requests")
    if found is None:
        return CopiesRead(requests=(), version=None)
    data, version = found
    return CopiesRead(requests=parse(data.get(r.COPIES_KEY, "[]")), version=version)


def write_copies(api: Any, requests: Requests, version: str | None) -> None:
    """Replace the requests read at ``version`` (create them when None); Conflict if they
    changed since."""
    write_config_map(
        api,
        r.COPIES_CONFIGMAP,
        {r.COPIES_KEY: text_of(requests)},
        version,
        "write the copy requests",
    )


def change_copies(api: Any, change: Callable[[Requests], Requests]) -> Requests:
    """Apply ``change`` to the requests as they are, under their version; the result."""
    for _ in range(_ATTEMPTS):
        read = read_copies(api)
        changed = change(read.requests)
        if changed == read.requests:
            return changed
        try:
            write_copies(api, changed, read.version)
        except Conflict:
            continue
        return changed
    raise ClusterError(f"cannot write {WHERE}: it changed under {_ATTEMPTS} writes in a row")


class KubeModelCopies:
    """``ports.cluster.ModelCopies`` on ConfigMap ``nodeau-copies``."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def requests(self) -> Requests:
        return read_copies(self._api).requests

    def request(
        self, machine: str, artifact: str, name: str, asker: str, at: datetime
    ) -> CopyRequest:
        after = change_copies(
            self._api,
            lambda now: with_ask(
                now, machine=machine, artifact=artifact, name=name, asker=asker, at=at
            ),
        )
        made = find_request(after, machine, artifact)
        assert made is not None, "with_ask keeps the request it was asked for"
        return made

    def withdraw(self, machine: str, artifact: str, asker: str) -> CopyRequest | None:
        after = change_copies(
            self._api,
            lambda now: without_ask(now, machine=machine, artifact=artifact, asker=asker),
        )
        return find_request(after, machine, artifact)
