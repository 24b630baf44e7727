"""``nodeau ps`` cold start against ``python -c pass``, measured side by side.

Usage: .venv/bin/python bench/cli.py [--runs 20]
Fresh processes, same interpreter, alternating, on an empty Nodeau home (a first ``ps``);
prints the ratio of medians with the goal (ps <= 4x python -c pass).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 4.0


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    nodeau = str(Path(sys.executable).parent / "nodeau")
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "NODEAU_HOME": home}
        baseline_argv = [sys.executable, "-c", "pass"]
        ps_argv = [nodeau, "ps"]
        timed(baseline_argv, env)
        timed(ps_argv, env)  # warm the page cache for both
        base, ps = [], []
        for _ in range(args.runs):
            base.append(timed(baseline_argv, env))
            ps.append(timed(ps_argv, env))
    b, p = statistics.median(base), statistics.median(ps)
    ratio = p / b
    print(f"python -c pass: median {b * 1000:.1f} ms over {args.runs} runs")
    print(f"nodeau ps:      median {p * 1000:.1f} ms over {args.runs} runs")
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"ratio: {ratio:.2f}x (goal <= {GOAL:.0f}x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
