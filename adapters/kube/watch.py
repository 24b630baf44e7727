"""Watching what the controller acts on: GPUServices, BatchJobs and their model-server Pods.

Why it is so: docs/adr/decisions/adapters-kube.md (watch.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.informer_cache import KnownObjects, version_of
from nodeau.adapters.kube.pods import PODS
from nodeau.domain.workloads import WorkloadKind

Key = tuple[str, str]  # (plural, object name)
WATCH_S = 60
RETRY_S = 2.0
_WATCH: Any = watch.Watch  # the client's watch is untyped
POD_PLURALS = {"service": r.GPUSERVICES, "batch": r.BATCHJOBS}
LISTED = "LISTED"  # what ``Seen`` is told of a whole list
Seen = Callable[[str, dict[str, Any]], None]  # (ADDED/MODIFIED/DELETED or LISTED, object)


def list_names(api: Any, plural: str) -> tuple[str, ...]:
    """The names of every object of one kind in nodeau-system."""
    custom: Any = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, plural)
    return tuple(sorted(item["metadata"]["name"] for item in listed["items"]))


def _custom_source(api: Any, plural: str) -> Callable[..., Any]:
    custom: Any = client.CustomObjectsApi(api)

    def source(**kwargs: Any) -> Any:
        return custom.list_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, plural, **kwargs
        )

    return source


def _pod_source(api: Any) -> Callable[..., Any]:
    core: Any = client.CoreV1Api(api)

    def source(**kwargs: Any) -> Any:
        return core.list_namespaced_pod(r.NAMESPACE, label_selector=r.WORKLOAD_LABEL, **kwargs)

    return source


def _key_of_custom(plural: str) -> Callable[[dict[str, Any]], Key | None]:
    return lambda obj: (plural, obj["metadata"]["name"])


def _key_of_pod(obj: dict[str, Any]) -> Key | None:
    labels = obj["metadata"].get("labels") or {}
    plural = POD_PLURALS.get(labels.get(r.KIND_LABEL, ""))
    workload = labels.get(r.WORKLOAD_LABEL)
    return None if plural is None or not workload else (plural, workload)


def _events(
    source: Callable[..., Any], stop: threading.Event, seen: Seen
) -> Iterator[dict[str, Any]]:
    """Every object the list, then the watch, shows (each passed to ``seen`` first, with
    what happened to it); lists again on 410 Gone."""
    while not stop.is_set():
        listed = source(_preload_content=False)
        data = _json(listed)
        version = data["metadata"]["resourceVersion"]
        seen(LISTED, data)
        yield from data["items"]
        w = _WATCH()
        try:
            while not stop.is_set():
                for event in w.stream(
                    source, resource_version=version, timeout_seconds=WATCH_S, deserialize=False
                ):
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    seen(str(event.get("type", "")), obj)
                    yield obj
                    if stop.is_set():
                        w.stop()
                        break
        except ApiException as exc:
            if exc.status != 410:
                raise


def _json(response: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(response.data)
    return parsed


def follow(
    source: Callable[..., Any],
    key_of: Callable[[dict[str, Any]], Key | None],
    notify: Callable[[Key], None],
    stop: threading.Event,
    seen: Seen | None = None,
) -> None:
    """Pass on the key of every object seen until ``stop`` is set; survives API failures.
    ``seen`` gets each list and each event before its key is passed on."""
    while not stop.is_set():
        try:
            for obj in _events(source, stop, seen or _ignore):
                key = key_of(obj)
                if key is not None:
                    notify(key)
        except (ApiException, HTTPError, OSError, ValueError):
            stop.wait(RETRY_S)


def _ignore(_what: str, _obj: dict[str, Any]) -> None:
    return None


def keeper(known: KnownObjects, plural: str) -> Seen:
    """What a watch of ``plural`` tells ``known``: each list whole, each event's object
    (a deletion as a tombstone at its version)."""

    def seen(what: str, obj: dict[str, Any]) -> None:
        if what == LISTED:
            known.listed(plural, obj.get("items") or (), version_of(obj))
        elif what == "DELETED":
            known.gone(plural, obj["metadata"]["name"], version_of(obj))
        elif what in ("ADDED", "MODIFIED"):
            known.seen(plural, obj)

    return seen


def start_watches(
    api: Any,
    notify: Callable[[Key], None],
    stop: threading.Event,
    known: KnownObjects | None = None,
) -> tuple[threading.Thread, ...]:
    """Watch GPUServices, BatchJobs and model-server Pods in background threads (keeping
    ``known`` up to date with what they show, before each key is passed on)."""
    feeds: tuple[tuple[str, Callable[..., Any], Callable[[dict[str, Any]], Key | None]], ...] = (
        (r.GPUSERVICES, _custom_source(api, r.GPUSERVICES), _key_of_custom(r.GPUSERVICES)),
        (r.BATCHJOBS, _custom_source(api, r.BATCHJOBS), _key_of_custom(r.BATCHJOBS)),
        (PODS, _pod_source(api), _key_of_pod),
    )
    threads = tuple(
        threading.Thread(
            target=follow,
            args=(source, key_of, notify, stop, None if known is None else keeper(known, name)),
            name=f"watch-{name}",
            daemon=True,
        )
        for name, source, key_of in feeds
    )
    for t in threads:
        t.start()
    return threads


class KubeWorkloadWatch:
    """``ports.workload_objects.WorkloadWatch`` on watches of GPUServices, BatchJobs and their Pods
    (``known``: the controller's cache of them, kept from what the watches show)."""

    def __init__(self, api: Any, known: KnownObjects | None = None) -> None:
        self._api = api
        self._known = known

    def start(self, notify: Callable[[WorkloadKind, str], None], stop: threading.Event) -> None:
        kinds = {r.GPUSERVICES: WorkloadKind.SERVICE, r.BATCHJOBS: WorkloadKind.BATCH}

        def on_key(key: Key) -> None:
            plural, name = key
            if plural in kinds:
                notify(kinds[plural], name)

        start_watches(self._api, on_key, stop, self._known)
