"""Benchmark: the controller's reconcile time for a large fleet, against the API server's floor.

Usage: python bench/reconcile.py [--machines 100] [--cards 4] [--services 500] [--workers 8]
                                 [--floor-runs 3] [--profile FILE]
Prints the pass per object against its floors, one by one and at once (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from bench.api_profile import Profile  # noqa: E402
from nodeau.adapters.kube import resources as r  # noqa: E402
from nodeau.adapters.kube.client import steady_credentials  # noqa: E402
from nodeau.apps.controller.bootstrap import DEFAULT_WORKERS  # noqa: E402
from nodeau.domain.leadership import DEFAULT_RENEW_DEADLINE_S  # noqa: E402
from tests.support.real.kube_apply import apply_manifests  # noqa: E402
from tests.support.real.kube_cluster import ControlPlane  # noqa: E402
from tests.support.real.kube_controller import controller as entitled_controller  # noqa: E402
from tests.support.real.kube_scale import check, populate, service_name  # noqa: E402

DEPLOY = ROOT / "deploy"


def baseline(api: Any, services: int, workers: int = 1) -> float:
    """Seconds for one GET and one status write of every object, ``workers`` at once."""
    custom: Any = client.CustomObjectsApi(api)

    def write(i: int, sentence: str | None) -> None:
        obj = custom.get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service_name(i)
        )
        obj["status"] = {} if sentence is None else {"sentence": sentence}
        custom.replace_namespaced_custom_object_status(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, service_name(i), obj
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: write(i, "baseline write"), range(services)))
    spent = time.perf_counter() - started
    with ThreadPoolExecutor(workers) as pool:  # as they were: nothing decided
        list(pool.map(lambda i: write(i, None), range(services)))
    return spent


def serving(api: Any) -> int:
    custom: Any = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES)
    return sum((i.get("status") or {}).get("state") == "serving" for i in listed["items"])


def per_object(seconds: float, objects: int, floors: dict[str, float]) -> str:
    against = ", ".join(f"{seconds / f:.2f}x the floor {how}" for how, f in floors.items())
    return f"{seconds:.2f} s, {seconds / objects * 1e3:.1f} ms per object: {against}"


def timed_pass(controller: Any, profile_to: Path | None) -> tuple[float, float]:
    """One resync: seconds to its last decision, and to its end."""
    decided: list[float] = []
    decide = controller.reconciler.decide

    def deciding(*args: Any, **kwargs: Any) -> bool:
        try:
            return bool(decide(*args, **kwargs))
        finally:
            decided.append(time.perf_counter())

    controller.reconciler.decide = deciding
    profiler = cProfile.Profile(time.process_time) if profile_to else None  # CPU, not waits
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    controller.resync()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_to)
    ended = time.perf_counter()
    controller.reconciler.decide = decide
    return max(decided, default=started) - started, ended - started


def measure(api: Any, plane: ControlPlane, args: argparse.Namespace) -> int:
    cards_total = args.machines * args.cards
    n = args.services
    profile = Profile(api, plane.processes)
    profile.start()
    alone = [baseline(api, n) for _ in range(args.floor_runs)]
    profile.stop()
    together = [baseline(api, n, args.workers) for _ in range(args.floor_runs)]
    # a floor of requests one after another varies from run to run (by a quarter on a shared
    # 2-core machine): its median counts
    floors = {"one by one": statistics.median(alone), f"{args.workers} at once": 0.0}
    floors[f"{args.workers} at once"] = statistics.median(together)
    print("\n1. the floor: one GET and one status write per object (median of its runs)")
    for (how, seconds), runs in zip(floors.items(), (alone, together), strict=True):
        each = ", ".join(f"{r / n * 1e3:.1f}" for r in runs)
        print(f"   {how}: {seconds:.2f} s, {seconds / n * 1e3:.1f} ms per object (runs: {each})")
    for line in profile.lines(2 * n * args.floor_runs):  # its writes and their undoing
        print(f"   {line}")

    # entitled to the Enterprise plan (the Home plan covers one machine of the fleet)
    # as deployed: elected, so no other controller writes for longer than the renew deadline
    controller = entitled_controller(
        api,
        identity="bench",
        workers=args.workers,
        sole_writer_for=timedelta(seconds=DEFAULT_RENEW_DEADLINE_S),
    )
    profile = Profile(api, plane.processes)
    profile.start()
    decided_s, pass_s = timed_pass(controller, args.profile)
    profile.stop()
    outcome = check(api, cards_total=cards_total)
    print(f"\n2. the controller, {args.workers} workers: one pass over every object")
    print(f"   every object decided: {per_object(decided_s, n, floors)}")
    print(f"   the whole pass (decisions carried out too): {per_object(pass_s, n, floors)}")
    print(
        f"   admitted {outcome.admitted}, refused {outcome.refused}, undecided "
        f"{outcome.undecided}, Pods {outcome.pods}"
    )
    for line in profile.lines(n):
        print(f"   {line}")

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=100)
    parser.add_argument("--cards", type=int, default=4)
    parser.add_argument("--services", type=int, default=500)
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--floor-runs", type=int, default=3, help="runs of each floor")
    parser.add_argument(
        "--profile", type=Path, help="write cProfile's statistics of the pass to this file"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        plane = ControlPlane(Path(work))
        try:
            cluster = plane.start()
            # as nodeau's own connect() makes it (both the floor and the controller use it)
            api = steady_credentials(
                config.new_client_from_config(config_file=str(cluster.kubeconfig))
            )
            apply_manifests(api, [DEPLOY / "00-namespace.yaml", DEPLOY / "10-crds.yaml"])
            started = time.perf_counter()
            populate(api, machines=args.machines, cards=args.cards, services=args.services)
            print(f"machine: {os.cpu_count()} cores")
            print(
                f"fleet: {args.machines} KWOK nodes x {args.cards} simulated cards = "
                f"{args.machines * args.cards} cards; {args.services} GPUServices "
                f"(set up in {time.perf_counter() - started:.1f} s)"
            )
            return measure(api, plane, args)
        finally:
            plane.stop()


if __name__ == "__main__":
    sys.exit(main())
