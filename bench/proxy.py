"""Benchmark: the endpoint against the model server directly, in the same run.

Usage: python bench/proxy.py [--requests 500] [--streams 200] [--concurrency 32] [--seconds 5]
                             [--fleet | --gateway] [--runs 1]
Goals: p50 added <= 1 ms, throughput >= 0.7x direct; this machine's figures (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from attrs import evolve

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.ports.runtime import RunningServer

ROOT = Path(__file__).resolve().parent.parent  # the child upstream imports tests.support

sys.path.insert(0, str(ROOT))
from tests.support.builders.admissions import decider, fleet_of  # noqa: E402

P50_GOAL_MS = 1.0
THROUGHPUT_GOAL = 0.7
WORKLOAD = "bench"
BODY = {"model": WORKLOAD, "messages": [{"role": "user", "content": "hello"}]}
STREAM_BODY = {**BODY, "stream": True}
START_S = 20.0


def start(command: list[str], *, reads_port: bool = False) -> subprocess.Popen[str]:
    """A child process; its standard output is read only when it prints its port."""
    out = subprocess.PIPE if reads_port else subprocess.DEVNULL
    return subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, text=True)


def wait_for(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the process exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit(f"{url}: nothing answered within {START_S} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_request(client: httpx.AsyncClient) -> float:
    began = time.perf_counter()
    response = await client.post("/v1/chat/completions", json=BODY)
    response.raise_for_status()
    return time.perf_counter() - began


async def first_byte(client: httpx.AsyncClient) -> float:
    began = time.perf_counter()
    async with client.stream("POST", "/v1/chat/completions", json=STREAM_BODY) as response:
        response.raise_for_status()
        waited = None
        async for _chunk in response.aiter_raw():
            if waited is None:
                waited = time.perf_counter() - began
    assert waited is not None
    return waited


async def alternate(
    clients: dict[str, httpx.AsyncClient],
    count: int,
    measure: Callable[[httpx.AsyncClient], Awaitable[float]],
    block: int = 50,
) -> dict[str, list[float]]:
    """``count`` sequential measurements per side, the sides alternating in blocks."""
    times: dict[str, list[float]] = {side: [] for side in clients}
    for client in clients.values():  # warm-up, not counted
        for _ in range(min(block, count)):
            await measure(client)
    while any(len(t) < count for t in times.values()):
        for side, client in clients.items():
            for _ in range(min(block, count - len(times[side]))):
                times[side].append(await measure(client))
    return times


@dataclass(frozen=True)
class Window:
    """One throughput window: requests completed, its length, and the CPU seconds each
    process spent in it."""

    done: int
    seconds: float
    cpu_s: dict[str, float]

    @property
    def rate(self) -> float:
        return self.done / self.seconds


async def throughput(
    base_url: str, concurrency: int, seconds: float, pids: dict[str, int]
) -> Window:
    """Completed requests per second of ``concurrency`` clients, each with its own connection
    (one httpx client each: one shared pool of 32 connections costs the client far more CPU
    per request, and more the slower the answers, which would skew the comparison). The clock
    starts once every client has connected and been answered once, so the clients' own
    set-up (an httpx client builds an SSL context) is counted in neither the time nor the
    CPU: under load it took whole windows, leaving a side at 0 requests."""
    done = 0
    ready = 0
    stop_at = float("inf")
    all_ready = asyncio.Event()
    go = asyncio.Event()

    async def worker() -> None:
        nonlocal done, ready
        async with httpx.AsyncClient(base_url=base_url, timeout=30, trust_env=False) as client:
            await one_request(client)  # connected before the clock counts it
            ready += 1
            if ready == concurrency:
                all_ready.set()
            await go.wait()
            while time.perf_counter() < stop_at:
                await one_request(client)
                done += 1

    workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
    everyone = asyncio.ensure_future(all_ready.wait())
    await asyncio.wait([everyone, *workers], return_when=asyncio.FIRST_COMPLETED)
    if not everyone.done():  # a worker failed before the start: its error, not a hang
        everyone.cancel()
        await asyncio.gather(*workers)
    before = {name: cpu_s(pid) for name, pid in pids.items()}
    began = time.perf_counter()
    stop_at = began + seconds
    go.set()
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - began
    spent = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
    return Window(done=done, seconds=elapsed, cpu_s=spent)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.3f} ms"


@dataclass(frozen=True)
class Outcome:
    """One run's two goal figures, and the machine's load averages (1, 5, 15 min) at its end."""

    added_p50_s: float
    ratio: float
    load: tuple[float, float, float]

    @property
    def met(self) -> bool:
        return self.added_p50_s * 1000 <= P50_GOAL_MS and self.ratio >= THROUGHPUT_GOAL


def load_averages() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


async def run(args: argparse.Namespace, direct: str, proxied: str, pids: dict[str, int]) -> Outcome:
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    async with (
        httpx.AsyncClient(base_url=direct, limits=limits, timeout=30, trust_env=False) as d,
        httpx.AsyncClient(base_url=proxied, limits=limits, timeout=30, trust_env=False) as p,
    ):
        clients = {"direct": d, "endpoint": p}
        urls = {"direct": direct, "endpoint": proxied}
        latency = await alternate(clients, args.requests, one_request)
        ttfb = await alternate(clients, args.streams, first_byte)
        rates: dict[str, list[float]] = {"direct": [], "endpoint": []}
        for side in ("direct", "endpoint"):  # warm-up at full concurrency
            await throughput(urls[side], args.concurrency, 0.5, pids)
        cpu = dict.fromkeys(pids, 0.0)
        direct_cpu = dict.fromkeys(pids, 0.0)
        served = direct_served = 0
        for _ in range(2):
            for side in clients:
                window = await throughput(urls[side], args.concurrency, args.seconds / 2, pids)
                rates[side].append(window.rate)
                if side == "endpoint":
                    served += window.done
                    for name in pids:
                        cpu[name] += window.cpu_s[name]
                else:
                    direct_served += window.done
                    for name in pids:
                        direct_cpu[name] += window.cpu_s[name]

    print(f"machine: {os.cpu_count()} cores; client, endpoint and upstream share them")
    print("load averages (1, 5, 15 min) now: {:.2f} {:.2f} {:.2f}".format(*load_averages()))
    print(f"\n1. non-streaming latency, {args.requests} sequential requests each")
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        a, b = percentile(latency["direct"], q), percentile(latency["endpoint"], q)
        print(f"   {label}: direct {ms(a)}  endpoint {ms(b)}  added {ms(b - a)}")
    added_p50 = percentile(latency["endpoint"], 0.5) - percentile(latency["direct"], 0.5)

    print(f"\n2. time to first streamed byte, {args.streams} sequential streams each")
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        a, b = percentile(ttfb["direct"], q), percentile(ttfb["endpoint"], q)
        print(f"   {label}: direct {ms(a)}  endpoint {ms(b)}  added {ms(b - a)}")

    direct_rate = statistics.mean(rates["direct"])
    proxied_rate = statistics.mean(rates["endpoint"])
    ratio = proxied_rate / direct_rate
    print(f"\n3. throughput, {args.concurrency} concurrent clients, {args.seconds:g} s each")
    print(f"   direct {direct_rate:8.0f} req/s  endpoint {proxied_rate:8.0f} req/s  {ratio:.2f}x")

    print("   CPU per request, by process: direct / through the endpoint")
    for name in pids:
        print(f"     {name:22s} {direct_cpu[name] / direct_served * 1e6:6.0f} us")
    for name in pids:
        print(f"     {name:22s} {cpu[name] / served * 1e6:6.0f} us")
    p50_ok = added_p50 * 1000 <= P50_GOAL_MS
    said = {True: "met", False: "NOT met"}
    rate_ok = ratio >= THROUGHPUT_GOAL
    print("\ngoals:")
    print(f"   p50 added <= {P50_GOAL_MS:g} ms: {said[p50_ok]} ({ms(added_p50)})")
    print(f"   throughput >= {THROUGHPUT_GOAL}x direct: {said[rate_ok]} ({ratio:.2f}x)")
    return Outcome(added_p50_s=added_p50, ratio=ratio, load=load_averages())


@contextmanager
def fleet_route(work: Path, upstream: str) -> Iterator[Path]:
    """A real API server holding a GPUService whose status routes to ``upstream``; its
    kubeconfig."""
    from kubernetes import client, utils

    from nodeau.adapters.kube import resources as r
    from tests.kube.conftest import BASE_MANIFESTS, DEPLOY, api_client, wait_established
    from tests.support.real.kube_cluster import ControlPlane
    from tests.support.real.kube_controller import create

    (work / "kube").mkdir()
    plane = ControlPlane(work / "kube")
    cluster = plane.start()
    try:
        api = api_client(cluster)
        for manifest in BASE_MANIFESTS:
            utils.create_from_yaml(api, str(DEPLOY / manifest))
        wait_established(api, (f"{r.GPUSERVICES}.{r.GROUP}", f"{r.BATCHJOBS}.{r.GROUP}"))
        create(api, WORKLOAD, "bench-model")
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, WORKLOAD,
            {"status": {"state": "serving", "endpoint": f"{upstream}/v1"}},
        )  # fmt: skip
        yield cluster.kubeconfig
    finally:
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="the endpoint of a workload on a fleet: it follows the GPUService's route on a "
        "real API server (started here) instead of reading a state database",
    )
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="the gateway (nodeau gateway: every model at one address, chosen by model) "
        "instead of the workload's own endpoint",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="measure this many times in a row (fresh processes each time), then print one "
        "line per run",
    )
    args = parser.parse_args()
    outcomes = []
    for n in range(1, args.runs + 1):
        if args.runs > 1:
            print(f"\n=== run {n} of {args.runs}")
        outcomes.append(measure(args))
    if args.runs > 1:
        said = {True: "met", False: "NOT met"}
        print(
            f"\n{args.runs} consecutive runs (goals: p50 added <= {P50_GOAL_MS:g} ms, "
            f"throughput >= {THROUGHPUT_GOAL}x direct; load averages 1, 5, 15 min at its end):"
        )
        for n, o in enumerate(outcomes, 1):
            load = " ".join(f"{x:.2f}" for x in o.load)
            print(
                f"   run {n}: p50 added {ms(o.added_p50_s)}  throughput {o.ratio:.2f}x  "
                f"goals {said[o.met]}  load {load}"
            )
    sys.exit(0 if all(o.met for o in outcomes) else 1)


def measure(args: argparse.Namespace) -> Outcome:
    """One run: an upstream and an endpoint started for it, measured, and stopped (the
    endpoint before its state database is removed)."""
    upstream = start([sys.executable, "-m", "tests.support.real.upstream"], reads_port=True)
    try:
        assert upstream.stdout is not None
        upstream_port = int(upstream.stdout.readline())
        direct = f"http://127.0.0.1:{upstream_port}"
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            state = Path(tmp) / "state.sqlite3"
            store = SqliteStateStore(state, clock=lambda: datetime.now(UTC))
            store.admit(WORKLOAD, decider(WORKLOAD, fleet_of(1), datetime.now(UTC))).unwrap()
            server = RunningServer(
                pid=upstream.pid,
                port=upstream_port,
                started_at=datetime.now(UTC),
                command=("tests.support.real.upstream",),
            )
            # the gateway routes to a workload whose endpoint listens: here the upstream's
            # port stands for it (the gateway only asks whether it accepts connections)
            listens = upstream_port if args.gateway else None
            store.update(WORKLOAD, lambda r: evolve(r, server=server, endpoint_port=listens))
            port = free_port()
            proxied = f"http://127.0.0.1:{port}"
            source = ["--state", str(state)]
            if args.fleet:
                plane = stack.enter_context(fleet_route(Path(tmp), direct))
                source = ["--fleet", "--kubeconfig", str(plane)]
            proxy = ["nodeau.apps.endpoint", "--workload", WORKLOAD]
            if args.gateway:
                proxy = ["nodeau.apps.endpoint.gateway"]
            endpoint = start(
                [
                    sys.executable, "-m", *proxy,
                    "--port", str(port), *source, "--log-level", "warning",
                ]
            )  # fmt: skip
            try:
                wait_for(f"{proxied}/health", endpoint)
                pids = {
                    "client (this process)": os.getpid(),
                    "endpoint": endpoint.pid,
                    "upstream": upstream.pid,
                }
                return asyncio.run(run(args, direct, proxied, pids))
            finally:
                endpoint.terminate()
                endpoint.wait(START_S)
    finally:
        upstream.terminate()
        upstream.wait(START_S)


if __name__ == "__main__":
    main()
