"""Benchmark: the endpoint's ``/health`` under 20,000 idle connections and half-sent heads.

Usage: python bench/idle_connections.py [--idle 20000] [--half 500] [--asks 200]
Prints p50 and p99 before and under the load, their ratio, and the endpoint's descriptors. Goal:
every ask answered 200, descriptors under 1,100 (method: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
from attrs import evolve
from proxy import START_S, WORKLOAD, decider, fleet_of, free_port, percentile, start, wait_for

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.ports.runtime import RunningServer

DESCRIPTORS_GOAL = 1100  # the cap of 1024 connections, and what the process itself holds


def asked(client: httpx.Client, count: int) -> tuple[list[float], list[int]]:
    """``count`` sequential asks of ``/health``: their times and status codes."""
    times, codes = [], []
    for _ in range(count):
        began = time.perf_counter()
        codes.append(client.get("/health").status_code)
        times.append(time.perf_counter() - began)
    return times, codes


def opened(stack: ExitStack, port: int, count: int, send: bytes) -> int:
    """``count`` connections held open on ``port`` (each sending ``send``); how many the
    kernel accepted (the endpoint closes the oldest idle ones once it holds its cap)."""
    made = 0
    for _ in range(count):
        sock = stack.enter_context(socket.socket())
        sock.settimeout(5.0)
        try:
            sock.connect(("127.0.0.1", port))
            if send:
                sock.sendall(send)
        except OSError:
            continue
        made += 1
    return made


PER_HOLDER = 5000  # connections one holder process opens (well within its limit)
HALF_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1"


def hold(port: int, count: int, half: bool) -> None:
    """A holder: open ``count`` connections, say how many, keep them until stdin closes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
    with ExitStack() as stack:
        print(opened(stack, port, count, HALF_HEAD if half else b""), flush=True)
        sys.stdin.read()


def holders(stack: ExitStack, port: int, count: int, half: bool) -> int:
    """Holder processes with ``count`` connections among them; how many were opened."""
    started = []
    for first in range(0, count, PER_HOLDER):
        n = min(PER_HOLDER, count - first)
        command = [sys.executable, __file__, "--hold", str(port), str(n)]
        child = subprocess.Popen(
            [*command, *(["--half-heads"] if half else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        stack.callback(child.wait, START_S)
        stack.callback(child.stdin.close)  # type: ignore[union-attr]
        started.append(child)
    return sum(int(child.stdout.readline()) for child in started)  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=20_000)
    parser.add_argument("--half", type=int, default=500)
    parser.add_argument("--asks", type=int, default=200)
    hidden = argparse.SUPPRESS  # a holder's own arguments
    parser.add_argument("--hold", nargs=2, type=int, metavar=("PORT", "COUNT"), help=hidden)
    parser.add_argument("--half-heads", action="store_true", help=hidden)
    args = parser.parse_args()
    if args.hold:
        hold(args.hold[0], args.hold[1], args.half_heads)
        return
    upstream = start([sys.executable, "-m", "tests.support.real.upstream"], reads_port=True)
    try:
        assert upstream.stdout is not None
        upstream_port = int(upstream.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            state = Path(tmp) / "state.sqlite3"
            store = SqliteStateStore(state, clock=lambda: datetime.now(UTC))
            store.admit(WORKLOAD, decider(WORKLOAD, fleet_of(1), datetime.now(UTC))).unwrap()
            server = RunningServer(
                pid=upstream.pid, port=upstream_port, started_at=datetime.now(UTC), command=()
            )
            store.update(WORKLOAD, lambda r: evolve(r, server=server))
            port = free_port()
            endpoint = start(
                [
                    sys.executable, "-m", "nodeau.apps.endpoint", "--workload", WORKLOAD,
                    "--port", str(port), "--state", str(state), "--log-level", "warning",
                ]
            )  # fmt: skip
            try:
                address = f"http://127.0.0.1:{port}"
                wait_for(f"{address}/health", endpoint)
                measure(args, stack, port, address, psutil.Process(endpoint.pid))
            finally:
                endpoint.terminate()
                endpoint.wait(START_S)
    finally:
        upstream.terminate()
        upstream.wait(START_S)


def measure(
    args: argparse.Namespace, stack: ExitStack, port: int, address: str, endpoint: psutil.Process
) -> None:
    with httpx.Client(base_url=address, trust_env=False, timeout=30.0) as client:
        asked(client, 20)  # warm
        quiet, _ = asked(client, args.asks)
    began = time.monotonic()
    idle = holders(stack, port, args.idle, half=False)
    half = holders(stack, port, args.half, half=True)
    took = time.monotonic() - began
    # a new client each time: a kept-alive connection would be one of the oldest idle ones
    with httpx.Client(base_url=address, trust_env=False, timeout=30.0) as client:
        loaded, codes = asked(client, args.asks)
    held = endpoint.num_fds()
    p50, p99 = percentile(quiet, 0.5), percentile(quiet, 0.99)
    l50, l99 = percentile(loaded, 0.5), percentile(loaded, 0.99)
    ok = sum(1 for c in codes if c == 200)
    print(f"opened {idle} idle and {half} half-sent connections in {took:.1f} s")
    print(f"/health with none:      p50 {p50 * 1000:.2f} ms  p99 {p99 * 1000:.2f} ms")
    print(f"/health under the load: p50 {l50 * 1000:.2f} ms  p99 {l99 * 1000:.2f} ms")
    print(f"ratio under load / none: p50 {l50 / p50:.2f}x  p99 {l99 / p99:.2f}x")
    print(f"answered 200: {ok} of {len(codes)}; the endpoint holds {held} descriptors")
    met = ok == len(codes) and held < DESCRIPTORS_GOAL
    said = "met" if met else "NOT met"
    print(f"goals (every ask 200, under {DESCRIPTORS_GOAL} descriptors): {said}")
    if not met:
        sys.exit(1)


if __name__ == "__main__":
    main()
