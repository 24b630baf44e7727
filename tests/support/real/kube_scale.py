"""The fleet of the scale test and the reconcile benchmark: many machines, many services.

``populate`` creates KWOK nodes reporting 24 GiB cards and a verified 4 GiB model, then
GPUServices asking for it; ``check`` says what is wrong in what the controller decided, if any.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from attrs import frozen
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.pods import list_pods
from nodeau.adapters.kube.reports import publish_report
from tests.support.real.kube_controller import create, report, small
from tests.support.real.kube_nodes import kwok_node
from tests.support.real.kube_store import reservations as ledger_of

THREADS = 8  # setting the fleet up is not what is measured: a few requests in parallel


def machine_name(i: int) -> str:
    return f"m{i:03d}"


def service_name(i: int) -> str:
    return f"svc-{i:04d}"


def populate(api: Any, *, machines: int, cards: int, services: int) -> None:
    """The machines, their reports, then the services (nothing decided yet)."""
    core: Any = client.CoreV1Api(api)

    def add(i: int) -> None:
        name = machine_name(i)
        core.create_node(kwok_node(name))
        publish_report(api, report(name, cards, small(name)))

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(add, range(machines)))
        list(pool.map(lambda i: create(api, service_name(i), "qwen"), range(services)))


@frozen(kw_only=True)
class Outcome:
    """What the controller decided for the fleet, counted."""

    admitted: int
    refused: dict[str, int]
    undecided: int
    pods: int
    problems: tuple[str, ...]


def _services(api: Any) -> list[dict[str, Any]]:
    custom: Any = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES)
    return list(listed["items"])


def check(api: Any, *, cards_total: int) -> Outcome:
    """Count the decisions and name every broken invariant."""
    problems: list[str] = []
    reservations = ledger_of(api)
    held = Counter(x.gpu_uuid for x in reservations)
    problems += [f"card {uuid} held {n} times in the ledger" for uuid, n in held.items() if n > 1]
    pods = [p for p in list_pods(api) if not p.deleting]
    on_card = Counter(p.gpu_uuid for p in pods)
    problems += [f"card {uuid} has {n} Pods" for uuid, n in on_card.items() if n > 1]
    by_workload = {x.workload: x for x in reservations}
    pod_of = {p.workload: p for p in pods}
    admitted, undecided = 0, 0
    refused: Counter[str] = Counter()
    for item in _services(api):
        name, st = item["metadata"]["name"], item.get("status") or {}
        if "refusal" in st:
            refused[st["refusal"]["code"]] += 1
        elif "record" in st:
            admitted += 1
            held_here = by_workload.get(name)
            pod = pod_of.get(name)
            if held_here is None or held_here.gpu_uuid != st.get("gpuUUID"):
                problems.append(f"{name}: status says {st.get('gpuUUID')}, ledger {held_here}")
            elif pod is None or (pod.node, pod.gpu_uuid) != (held_here.machine, held_here.gpu_uuid):
                problems.append(f"{name}: its Pod is not on its card ({pod})")
        else:
            undecided += 1
    if refused and admitted < cards_total:
        free = cards_total - admitted
        problems.append(f"{sum(refused.values())} refused while {free} cards were free")
    return Outcome(
        admitted=admitted,
        refused=dict(refused),
        undecided=undecided,
        pods=len(pods),
        problems=tuple(problems),
    )
