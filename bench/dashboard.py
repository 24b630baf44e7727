"""Benchmark: the local dashboard over a large fleet — its data route and its first paint.

Usage: python bench/dashboard.py [--machines 100] [--cards 4] [--services 500] [--requests 50]
                                 [--loads 10]
Prints each figure's ratio to its goal: board p50 <= 20 ms, first meaningful paint p50 <= 500 ms.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from kubernetes import client, config  # noqa: E402

from nodeau.adapters.kube import resources as r  # noqa: E402
from tests.support.real.browser import Page, chromium  # noqa: E402
from tests.support.real.cli import Cli  # noqa: E402
from tests.support.real.kube_apply import apply_manifests  # noqa: E402
from tests.support.real.kube_cluster import ControlPlane  # noqa: E402
from tests.support.real.kube_controller import controller as fleet_controller  # noqa: E402
from tests.support.real.kube_scale import check, populate  # noqa: E402

DEPLOY = ROOT / "deploy"
DATA_GOAL_MS = 20.0
PAINT_GOAL_MS = 500.0
SHOWN = "nodeau-board-shown"
WITH_CLI = {"with": "cli"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(n: int, call: Callable[[], object]) -> list[float]:
    """Milliseconds of ``n`` sequential calls (after one unmeasured warm-up call)."""
    call()
    spent = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1e3)
    return spent


def line(label: str, values: list[float], goal: float | None = None) -> str:
    p50 = statistics.median(values)
    said = f"   {label:34s} p50 {p50:8.1f} ms  p90 {percentile(values, 0.9):8.1f} ms"
    if goal is not None:
        verdict = "met" if p50 <= goal else "NOT met"
        said += f"  {p50 / goal:5.2f}x the goal of {goal:g} ms ({verdict})"
    return said


def load_averages() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def board_ok(answer: httpx.Response) -> httpx.Response:
    answer.raise_for_status()
    return answer


def size(web: httpx.Client, bearer: dict[str, str], params: dict[str, str] | None = None) -> str:
    """One answer of the data route: its JSON, and what was sent (gzipped)."""
    with web.stream("GET", "/api/board", params=params, headers=bearer) as answer:
        sent = b"".join(board_ok(answer).iter_raw())
    gzipped = answer.headers.get("content-encoding") == "gzip"
    body = gzip.decompress(sent) if gzipped else sent
    return f"{len(body) / 1e6:.2f} MB, {len(sent) / 1e3:.0f} kB sent"


def paint_times(page: Page, address: str) -> tuple[float, float]:
    """(first contentful paint, the board shown), in ms from the navigation's start."""
    page.call("Page.navigate", url=address + "/")
    shown = page.wait_for(
        f"(e => e.length && e[0].startTime)(performance.getEntriesByName({SHOWN!r}))"
    )
    fcp = page.evaluate(
        "(e => e.length ? e[0].startTime : null)"
        "(performance.getEntriesByName('first-contentful-paint'))"
    )
    return float(fcp or 0.0), float(shown)


def measure(args: argparse.Namespace, kubeconfig: Path, api: Any, work: Path) -> None:
    cli = Cli(work / "home", NODEAU_PLANE="kubernetes", KUBECONFIG=str(kubeconfig))
    opened: dict[str, Any] = cli.json("dashboard")  # type: ignore[assignment]
    try:
        bearer = {"Authorization": f"Bearer {opened['token']}"}
        custom: Any = client.CustomObjectsApi(api)
        with httpx.Client(base_url=opened["address"], timeout=60, trust_env=False) as web:
            board = board_ok(web.get("/api/board", headers=bearer)).json()
            print(
                f"the page shows {len(board['hardware']['machines'])} machines, "
                f"{len(board['workloads']['rows'])} workloads, {len(board['alerts'])} alerts "
                f"({size(web, bearer)} a poll; with the CLI's JSON {size(web, bearer, WITH_CLI)})"
            )
            if board["notes"]:
                print(f"   sections not read: {board['notes']}")
            print(f"\n1. data, {args.requests} sequential requests each")
            session = timed(args.requests, lambda: web.get("/api/session", headers=bearer))
            listed = timed(
                args.requests,
                lambda: custom.list_namespaced_custom_object(
                    r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, _preload_content=False
                ).read(),
            )
            data = timed(args.requests, lambda: board_ok(web.get("/api/board", headers=bearer)))
            with_cli = timed(
                args.requests,
                lambda: board_ok(web.get("/api/board", params=WITH_CLI, headers=bearer)),
            )
            print(line("floor: GET /api/session", session))
            print(line("floor: LIST gpuservices (API server)", listed))
            print(line("GET /api/board?with=cli (no view)", with_cli))
            print(line("GET /api/board (the page's data)", data, DATA_GOAL_MS))

        print(f"\n2. first meaningful paint, {args.loads} loads (headless chromium)")
        with chromium() as new_page:
            page = new_page()
            page.open(opened["url"])  # the token exchanged for the cookie, as a first visit
            page.wait_for(f"performance.getEntriesByName({SHOWN!r}).length")
            fcps, shown = [], []
            for _ in range(args.loads):
                fcp, board_shown = paint_times(page, opened["address"])
                fcps.append(fcp)
                shown.append(board_shown)
        print(line("first contentful paint (empty page)", fcps))
        print(line("the board shown (meaningful)", shown, PAINT_GOAL_MS))
    finally:
        cli("dashboard", "--stop")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=100)
    parser.add_argument("--cards", type=int, default=4)
    parser.add_argument("--services", type=int, default=500)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "cluster").mkdir()
        plane = ControlPlane(work / "cluster")
        try:
            cluster = plane.start()
            api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
            apply_manifests(api, [DEPLOY / "00-namespace.yaml", DEPLOY / "10-crds.yaml"])
            started = time.perf_counter()
            populate(api, machines=args.machines, cards=args.cards, services=args.services)
            # an Enterprise entitlement (signed by the tests' key), as test_scale's fleet has
            fleet_controller(api, identity="bench").resync()
            decided = check(api, cards_total=args.machines * args.cards)
            print(f"machine: {os.cpu_count()} cores; load averages now {load_averages()}")
            print(
                f"fleet: {args.machines} KWOK machines x {args.cards} simulated cards, "
                f"{args.services} GPUServices: {decided.admitted} admitted, refused "
                f"{decided.refused}, {decided.undecided} undecided "
                f"(set up in {time.perf_counter() - started:.1f} s)"
            )
            measure(args, cluster.kubeconfig, api, work)
            print(f"\nload averages at the end: {load_averages()}")
        except subprocess.TimeoutExpired as exc:
            print(f"a command did not finish: {exc}", file=sys.stderr)
            return 1
        finally:
            plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
