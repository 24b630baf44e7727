"""Benchmark: the controller's reconcile time for a large fleet, against the API server's floor.

    python bench/reconcile.py [--machines 100] [--cards 4] [--services 500]

Starts the test control plane (etcd, kube-apiserver, KWOK: tests/support/kube_cluster.py,
binaries from scripts/build-kube-binaries), applies deploy/'s namespace and CRDs, then
creates ``--machines`` KWOK nodes, each with an agent report of ``--cards`` simulated 24 GiB
cards and a verified copy of a 4 GiB model, and ``--services`` GPUServices asking for it.

1. Baseline, same run, same client: for every GPUService, one GET and one status write —
   the least any controller must send the API server per object.
2. The controller (apps/controller, in-process): one pass over every object decides each one
   (admission and placement on the ledger, status, Events, the Pod for each admitted one).
   Reported: wall time, per object, and the ratio to the baseline.
3. Settling: further passes until every admitted service is serving (KWOK runs the Pods).

Every invariant of the scale test is checked on the result (no card held twice, each
admitted service's Pod on its card, refusals only once the cards are gone). The figures
hold for this machine only: the API server, etcd and KWOK share its cores with the client.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from nodeau.adapters.kube import resources as r  # noqa: E402
from tests.support.kube_apply import apply_manifests  # noqa: E402
from tests.support.kube_cluster import ControlPlane  # noqa: E402
from tests.support.kube_controller import controller as entitled_controller  # noqa: E402
from tests.support.kube_scale import check, populate, service_name  # noqa: E402

DEPLOY = ROOT / "deploy"


def baseline(api: Any, services: int) -> list[float]:
    """Seconds per object for one GET and one status write, each object once."""
    custom: Any = client.CustomObjectsApi(api)
    spent = []
    for i in range(services):
        started = time.perf_counter()
        obj = custom.get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service_name(i)
        )
        obj["status"] = {"sentence": "baseline write"}
        custom.replace_namespaced_custom_object_status(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service_name(i), obj
        )
        spent.append(time.perf_counter() - started)
    for i in range(services):  # as they were: nothing decided
        obj = custom.get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service_name(i)
        )
        obj["status"] = {}
        custom.replace_namespaced_custom_object_status(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service_name(i), obj
        )
    return spent


def serving(api: Any) -> int:
    custom: Any = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES)
    return sum((i.get("status") or {}).get("state") == "serving" for i in listed["items"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=100)
    parser.add_argument("--cards", type=int, default=4)
    parser.add_argument("--services", type=int, default=500)
    args = parser.parse_args()
    cards_total = args.machines * args.cards
    with tempfile.TemporaryDirectory() as work:
        plane = ControlPlane(Path(work))
        try:
            cluster = plane.start()
            api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
            apply_manifests(api, [DEPLOY / "00-namespace.yaml", DEPLOY / "10-crds.yaml"])
            started = time.perf_counter()
            populate(api, machines=args.machines, cards=args.cards, services=args.services)
            print(f"machine: {os.cpu_count()} cores")
            print(
                f"fleet: {args.machines} KWOK nodes x {args.cards} simulated cards = "
                f"{cards_total} cards; {args.services} GPUServices "
                f"(set up in {time.perf_counter() - started:.1f} s)"
            )

            floor = baseline(api, args.services)
            floor_total = sum(floor)
            print("\n1. baseline: one GET and one status write per object")
            print(
                f"   {floor_total:.2f} s in all, p50 {statistics.median(floor) * 1e3:.1f} ms "
                f"per object"
            )

            # entitled to the Enterprise plan (the Home plan covers one machine of the fleet)
            controller = entitled_controller(api, identity="bench")
            started = time.perf_counter()
            controller.resync()
            decided_s = time.perf_counter() - started
            outcome = check(api, cards_total=cards_total)
            print("\n2. the controller: one pass over every object")
            print(
                f"   {decided_s:.2f} s in all, {decided_s / args.services * 1e3:.1f} ms per "
                f"object, {decided_s / floor_total:.1f}x the baseline"
            )
            print(
                f"   admitted {outcome.admitted}, refused {outcome.refused}, undecided "
                f"{outcome.undecided}, Pods {outcome.pods}"
            )

            started = time.perf_counter()
            passes = 0
            while serving(api) < outcome.admitted and passes < 30:
                controller.resync()
                passes += 1
            settled_s = time.perf_counter() - started
            print("\n3. settling: passes until every admitted service is serving")
            print(f"   {serving(api)} serving after {passes} more passes, {settled_s:.2f} s")

            final = check(api, cards_total=cards_total)
            print("\ninvariants:", "all held" if not final.problems else "BROKEN")
            for problem in final.problems[:20]:
                print("  ", problem)
            return 1 if final.problems or final.undecided else 0
        finally:
            plane.stop()


if __name__ == "__main__":
    sys.exit(main())
