"""The controller's cache of its objects on a real API server (adapters/kube/informer_cache.py): its
reads send no request where it knows, it keeps what its own writes answered, it learns a
kubelet's change from a list or from its watch, and a person's change between its read and
its write is never lost (the write names the version read: a conflict, a read, the change
again)."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from nodeau.adapters.kube.informer_cache import KnownObjects
from nodeau.adapters.kube.pods import KubeServerPods
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.watch import KubeWorkloadWatch
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.lifecycle import ServerPhase
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.workload_objects import Condition
from tests.support.builders.admissions import decider, fleet_of
from tests.support.real.kube_nodes import kwok_node, wait_for

SERVICE = WorkloadKind.SERVICE
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Sent:
    """Count the requests ``api`` sends, by method and path."""

    def __init__(self, api: client.ApiClient) -> None:
        self.requests: Counter[str] = Counter()
        rest: Any = api.rest_client
        original = rest.request

        def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            path = url.split("?", maxsplit=1)[0]
            self.requests[f"{method} {path.rsplit('/namespaces/', 1)[-1]}"] += 1
            return original(method, url, *args, **kwargs)

        rest.request = counted

    def reads(self) -> int:
        return sum(n for what, n in self.requests.items() if what.startswith("GET"))


def ports(api: client.ApiClient) -> tuple[KnownObjects, KubeWorkloadObjects, KubeStateStore]:
    known = KnownObjects()
    objects = KubeWorkloadObjects(api, identity="known", known=known)
    store = KubeStateStore(api, clock=lambda: datetime.now(UTC), identity="known", known=known)
    return known, objects, store


def test_an_admission_from_a_listed_object_sends_no_read_of_it(
    fresh_fleet: client.ApiClient,
) -> None:
    client.CoreV1Api(fresh_fleet).create_node(kwok_node("m1"))
    _known, objects, store = ports(fresh_fleet)
    objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen-race"))
    store.admit("chat", decider("chat", fleet_of(1), NOW)).unwrap()  # lists the claims once
    [listed] = objects.list_all()
    sent = Sent(fresh_fleet)
    assert objects.guard(listed) is True
    guarded = objects.get(SERVICE, "chat")
    assert guarded is not None and guarded.guarded and guarded.decided
    objects.set_status(SERVICE, "chat", {"endpoint": ""}, [], NOW)
    assert sent.reads() == 0, sent.requests  # every read answered from what was seen
    fresh = KubeWorkloadObjects(fresh_fleet).get(SERVICE, "chat")
    assert fresh is not None
    assert objects.get(SERVICE, "chat") == fresh  # what it keeps is what the server has


def test_a_persons_change_between_a_read_and_a_write_is_kept(
    fresh_fleet: client.ApiClient,
) -> None:
    _known, objects, _store = ports(fresh_fleet)
    objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen-race"))
    objects.list_all()
    KubeWorkloadObjects(fresh_fleet).want_endpoint(SERVICE, "chat", serving=False)  # a person
    ready = Condition(type="Ready", ok=False, reason="Starting", message="not yet")
    objects.set_status(SERVICE, "chat", {"endpoint": ""}, [ready], NOW)  # on the stale read
    after = KubeWorkloadObjects(fresh_fleet).get(SERVICE, "chat")
    assert after is not None
    assert after.spec["endpoint"] == "stopped"  # the person's change stands
    assert after.condition("Ready") is not None  # and so does the controller's
    assert objects.get(SERVICE, "chat") == after


def test_a_servers_change_is_learnt_from_a_list_and_from_the_watch(
    fresh_fleet: client.ApiClient,
) -> None:
    client.CoreV1Api(fresh_fleet).create_node(kwok_node("m1"))
    known, objects, store = ports(fresh_fleet)
    pods = KubeServerPods(fresh_fleet, known=known)
    objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen-race"))
    record = store.admit("chat", decider("chat", fleet_of(1), NOW)).unwrap().record
    owner = objects.get(SERVICE, "chat")
    assert owner is not None
    pods.read_all()
    assert pods.create(record, owner, on_card=False) is True
    made = pods.read(SERVICE, "chat")
    assert made is not None and made.phase is ServerPhase.STARTING  # its own write's answer
    fresh = KubeServerPods(fresh_fleet)
    wait_for(
        lambda: (p := fresh.read(SERVICE, "chat")) is not None and p.phase is ServerPhase.READY,
        "KWOK runs the Pod",
    )
    kept = pods.read(SERVICE, "chat")
    assert kept is not None and kept.phase is ServerPhase.STARTING  # nothing learnt yet
    pods.read_all()
    listed = pods.read(SERVICE, "chat")
    assert listed is not None and listed.phase is ServerPhase.READY

    stop = threading.Event()
    KubeWorkloadWatch(fresh_fleet, known).start(lambda _kind, _name: None, stop)
    try:
        assert pods.delete(SERVICE, "chat", force=True) is True
        wait_for(lambda: pods.read(SERVICE, "chat") is None, "the watch shows the Pod gone")
        fresh_ask = WorkloadAsk(kind=SERVICE, name="embed", model="qwen-race")
        KubeWorkloadObjects(fresh_fleet).create(fresh_ask)  # a person applies another
        wait_for(lambda: objects.get(SERVICE, "embed") is not None, "the watch shows it")
    finally:
        stop.set()
