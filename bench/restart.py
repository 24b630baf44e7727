"""A model server killed 5 times under a serving endpoint: how soon it is seen, how soon it serves.

Usage: NODEAU_LLAMA_SERVER=... .venv/bin/python bench/restart.py [--kills 5] [--same]
Prints kill -> ps shows it, -> recorded, -> serving again (against the scheduled back-off);
``--same`` kills one workload again and again (over 5 minutes for 5 kills; docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodeau.adapters.sqlite_state import SqliteStateStore  # noqa: E402
from tests.support.builders.tiny_gguf import write_tiny_llama  # noqa: E402

NODEAU = str(Path(sys.executable).parent / "nodeau")
POLL_S = 0.01
BOUND_S = 600.0


def nodeau(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([NODEAU, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"nodeau {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def state_of(home: Path, name: str) -> tuple[str, object]:
    record = SqliteStateStore(home / "state.sqlite3", lambda: datetime.now(UTC)).snapshot()
    found = record.named(name)
    assert found is not None
    return found.workload.state.value, found


def row_state(env: dict[str, str], name: str) -> str:
    rows = json.loads(nodeau(env, "ps", "--json").stdout)
    return next(str(r["state"]) for r in rows if r["name"] == name)


def one_kill(env: dict[str, str], home: Path, name: str) -> dict[str, float]:
    _, record = state_of(home, name)
    server = record.server  # type: ignore[attr-defined]
    rows = json.loads(nodeau(env, "ps", "--json").stdout)
    base = next(r["endpoint"] for r in rows if r["name"] == name)
    recorded: list[float] = []

    def watch_state() -> None:  # beside the ps polls: when the supervisor records it
        while not recorded and time.perf_counter() < deadline:
            if state_of(home, name)[0] == "restarting":
                recorded.append(time.perf_counter() - killed)
            time.sleep(POLL_S)

    killed = time.perf_counter()
    deadline = killed + BOUND_S
    os.killpg(server.pid, signal.SIGKILL)
    watcher = threading.Thread(target=watch_state)
    watcher.start()
    seen = served = None
    with httpx.Client(trust_env=False, timeout=5) as client:
        while seen is None:  # one whole `nodeau ps` per look
            if row_state(env, name) != "serving":
                seen = time.perf_counter() - killed
        watcher.join()
        _, after = state_of(home, name)
        w = after.workload  # type: ignore[attr-defined]
        scheduled = (w.next_attempt - w.last_exit.at).total_seconds()
        while served is None and time.perf_counter() < deadline:
            try:
                if client.get(f"{base}/models").status_code == 200:
                    served = time.perf_counter() - killed
            except httpx.HTTPError:
                pass
            time.sleep(POLL_S)
    if served is None or not recorded:
        raise SystemExit(f"{name} did not serve again within {BOUND_S:g} s")
    return {"seen": seen, "recorded": recorded[0], "served": served, "scheduled": scheduled}


def plain_ps(env: dict[str, str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        nodeau(env, "ps", "--json")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--same", action="store_true", help="kill one workload every time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        env = {
            **os.environ,
            "NODEAU_HOME": str(home),
            "NODEAU_MACHINE": "bench",
            "NODEAU_SIMULATED_GPUS": f"{args.kills} x 24 GiB",
            "NODEAU_DISK_RESERVE_BYTES": "0",
        }
        model = write_tiny_llama(Path(folder) / "tiny.gguf", seed=3, quant="q8_0")
        nodeau(env, "models", "import", str(model), "--alias", "tiny")
        names = ["w0"] * args.kills if args.same else [f"w{i}" for i in range(args.kills)]
        started: list[str] = []
        results = []
        try:
            for name in names:
                if name not in started:
                    nodeau(env, "run", "tiny", "--name", name, "--context", "256")
                    started.append(name)
                baseline = plain_ps(env)
                result = one_kill(env, home, name)
                results.append((name, baseline, result))
                ratio = result["served"] / result["scheduled"]
                print(
                    f"{name}: kill -> ps shows it {result['seen'] * 1000:6.0f} ms"
                    f" (a plain ps: {baseline * 1000:4.0f} ms);"
                    f" kill -> recorded restarting {result['recorded'] * 1000:5.0f} ms;"
                    f" kill -> serving again {result['served']:6.2f} s"
                    f" (back-off {result['scheduled']:g} s, {ratio:.3f}x)",
                    flush=True,
                )
        finally:
            for name in started:
                stop = [NODEAU, "stop", name, "--workload"]
                subprocess.run(stop, env=env, capture_output=True, check=False)
    seen = [r["seen"] for _, _, r in results]
    recorded = [r["recorded"] for _, _, r in results]
    over = [r["served"] - r["scheduled"] for _, _, r in results]
    base = statistics.median(b for _, b, _ in results)
    print(
        f"median: kill -> ps shows it {statistics.median(seen) * 1000:.0f} ms"
        f" ({statistics.median(seen) / base:.2f}x a plain ps);"
        f" kill -> recorded {statistics.median(recorded) * 1000:.0f} ms;"
        f" serving again {statistics.median(over):.2f} s after the back-off"
        f" (max {max(over):.2f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
