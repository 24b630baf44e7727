"""Where a GPUService answers now, followed through a watch of that one object.

Why it is so: docs/adr/decisions/adapters-kube.md (routes.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from attrs import evolve
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.server_keys import read_key
from nodeau.domain.tasks import Task
from nodeau.ports.cluster import ClusterError, Route

WATCH_S = 60
RETRY_S = 1.0
API_SUFFIX = "/v1"
_WATCH: Any = watch.Watch  # the client's watch is untyped


def route_of(body: Mapping[str, Any]) -> Route:
    """The route a GPUService's body states."""
    meta = body["metadata"]
    spec: Mapping[str, Any] = body.get("spec") or {}
    status: Mapping[str, Any] = body.get("status") or {}
    endpoint = str(status.get("endpoint") or "")
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    created = meta.get("creationTimestamp")
    record = status.get("record")
    admitted = record.get("workload") if isinstance(record, Mapping) else None
    workload: Mapping[str, Any] = admitted if isinstance(admitted, Mapping) else {}
    recorded = workload.get("names")
    listed = recorded if isinstance(recorded, list) else []
    names = (spec.get("model"), workload.get("model"), *listed)
    artifact = workload.get("artifact_id")
    return Route(
        workload=str(meta["name"]),
        task=Task(spec.get("task", Task.CHAT.value)),
        base_url=endpoint.removesuffix(API_SUFFIX) or None,
        state=str(status.get("state") or ""),
        why="" if ready is None else str(ready.get("message") or ""),
        since=None if not created else datetime.fromisoformat(str(created)),
        names=tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n)),
        artifact_id=artifact if isinstance(artifact, str) else "",
        endpoint_stopped=spec.get("endpoint", "serving") == "stopped",
    )


class KubeWorkloadRoutes:
    """``ports.cluster.WorkloadRoutes`` on watches of one GPUService each."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self._custom: Any = client.CustomObjectsApi(api)
        self._keys: dict[tuple[str, str], str | None] = {}  # (workload, address): its key

    def _keyed(self, route: Route | None) -> Route | None:
        """The route with its model server's key, read once per address."""
        if route is None or route.base_url is None:
            return route
        at = (route.workload, route.base_url)
        if self._keys.get(at) is None:
            try:
                self._keys[at] = read_key(self._api, "service", route.workload)
            except ClusterError as exc:  # e.g. not allowed to read it: say so, route nothing
                return evolve(route, base_url=None, why=f"its model server's key: {exc}")
        return evolve(route, api_key=self._keys[at])

    def _list(self, name: str | None, **kwargs: Any) -> Any:
        """One GPUService by ``name``, or every one (None)."""
        selected = {} if name is None else {"field_selector": f"metadata.name={name}"}
        return self._custom.list_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, **selected, **kwargs
        )

    def follow(
        self, name: str, changed: Callable[[Route | None], None], stop: threading.Event
    ) -> None:
        while not stop.is_set():
            try:
                self._follow_once(name, changed, stop)
            except (ApiException, HTTPError, OSError, ValueError, KeyError):
                stop.wait(RETRY_S)

    def follow_all(
        self, changed: Callable[[Mapping[str, Route]], None], stop: threading.Event
    ) -> None:
        routes: dict[str, Route] = {}

        def one(name: str, route: Route | None) -> None:
            if route is None:
                routes.pop(name, None)
            else:
                routes[name] = route
            changed(dict(routes))

        def listed(items: list[Mapping[str, Any]]) -> None:
            routes.clear()
            for item in items:
                keyed = self._keyed(route_of(item))
                assert keyed is not None
                routes[keyed.workload] = keyed
            changed(dict(routes))

        while not stop.is_set():
            try:
                self._watch(None, listed, one, stop)
            except (ApiException, HTTPError, OSError, ValueError, KeyError):
                stop.wait(RETRY_S)

    def _follow_once(
        self, name: str, changed: Callable[[Route | None], None], stop: threading.Event
    ) -> None:
        def listed(items: list[Mapping[str, Any]]) -> None:
            changed(self._keyed(route_of(items[0])) if items else None)

        self._watch(name, listed, lambda _name, route: changed(route), stop)

    def _watch(
        self,
        name: str | None,
        listed: Callable[[list[Mapping[str, Any]]], None],
        one: Callable[[str, Route | None], None],
        stop: threading.Event,
    ) -> None:
        """List ``name`` (None: every service) and tell ``listed``, then watch from that list
        and tell ``one`` of each change (None: deleted), until ``stop`` or the watch fails."""

        def source(**kwargs: Any) -> Any:
            return self._list(name, **kwargs)

        found = json.loads(source(_preload_content=False).data)
        listed(found["items"])
        version = found["metadata"]["resourceVersion"]
        w = _WATCH()
        try:
            while not stop.is_set():
                for event in w.stream(
                    source, resource_version=version, timeout_seconds=WATCH_S, deserialize=False
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        return  # 410 Gone and the like: list again
                    version = obj["metadata"]["resourceVersion"]
                    gone = event["type"] == "DELETED"
                    one(obj["metadata"]["name"], None if gone else self._keyed(route_of(obj)))
                    if stop.is_set():
                        w.stop()
                        return
        except ApiException as exc:
            if exc.status != 410:
                raise
