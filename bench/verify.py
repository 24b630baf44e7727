"""Benchmark: verifying and pulling a model file, each against its plain baseline.

Usage: python bench/verify.py [--size-mib 1024] [--dir D] [--runs 3] [--pull-runs 5]
Goals: verify >= 0.95x ``sha256sum``'s throughput; pull (download and SHA-256 in one pass)
<= 1.15x a plain download's time (method: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from nodeau.adapters.hashing import hash_file
from nodeau.adapters.http_publisher import HttpPublisher
from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.ports.models import PartialFile

ROOT = Path(__file__).resolve().parent.parent  # the child publisher imports tests.support from here

MIB = 1024 * 1024
VERIFY_GOAL = 0.95
PULL_GOAL = 1.15


def bench_file(folder: Path, size_mib: int) -> Path:
    """A file of ``size_mib`` MiB of random bytes in ``folder``, reused when already there."""
    path = folder / f"verify-bench-{size_mib}MiB.bin"
    if path.exists() and path.stat().st_size == size_mib * MIB:
        return path
    with path.open("wb") as out:
        for _ in range(size_mib):
            out.write(os.urandom(MIB))
    return path


def best_of_each(
    runs: int, baseline: Callable[[], object], ours: Callable[[], object]
) -> tuple[float, float]:
    """Seconds of the fastest of ``runs`` timed calls of each, after one untimed call of each.

    The calls alternate (baseline, ours, baseline, ...) so a change in the
    machine's load during the run weighs on both sides alike.
    """
    baseline()
    ours()
    best = [float("inf"), float("inf")]
    for _ in range(runs):
        for side, action in enumerate((baseline, ours)):
            start = time.perf_counter()
            action()
            best[side] = min(best[side], time.perf_counter() - start)
    return best[0], best[1]


def sha256sum(path: Path) -> str:
    result = subprocess.run(["sha256sum", str(path)], check=True, capture_output=True, text=True)
    return result.stdout.split()[0]


def plain_download(client: httpx.Client, url: str, target: Path) -> None:
    """The baseline: stream the body to a file, nothing else.

    It writes the way ``HttpPublisher`` does (about 1 MiB of received pieces
    per ``writev``, no copy into a user-space buffer), so the two sides differ
    only by the SHA-256 and the checks around it.
    """
    with client.stream("GET", url) as response, target.open("wb", buffering=0) as out:
        response.raise_for_status()
        pending: list[bytes] = []
        pending_bytes = 0
        for piece in response.iter_raw():
            pending.append(piece)
            pending_bytes += len(piece)
            if pending_bytes >= MIB:
                os.writev(out.fileno(), pending)
                pending, pending_bytes = [], 0
        if pending:
            os.writev(out.fileno(), pending)


def nodeau_pull(publisher: HttpPublisher, url: str, target: Path, expected: ArtifactFile) -> Sha256:
    """Nodeau's pull: a fresh fetch into an empty partial file, hashed on arrival."""
    target.unlink(missing_ok=True)
    return publisher.fetch_into(
        url, PartialFile(path=target, bytes_present=0), expected, lambda _p, _t: None
    )


def start_publisher(path: Path) -> tuple[subprocess.Popen[str], str]:
    """The test publisher serving ``path`` in a child process; its URL for the file."""
    program = (
        "import sys, pathlib\n"
        "from tests.support.real.publisher import local_publisher\n"
        "with local_publisher() as pub:\n"
        "    print(pub.serve('/model.bin', pathlib.Path(sys.argv[1])), flush=True)\n"
        "    sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", program, str(path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def verdict(ok: bool) -> str:
    return "goal met" if ok else "GOAL MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=None, help="where the test file is kept")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side, verify")
    parser.add_argument(
        "--pull-runs", type=int, default=5, help="timed runs per side, pull (noisier: network)"
    )
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.gettempdir())
    path = bench_file(folder, args.size_mib)
    size = path.stat().st_size
    print(f"file: {path} ({size / MIB:.0f} MiB), {os.cpu_count()} CPUs")
    print(
        f"best of {args.runs} (verify) and {args.pull_runs} (pull) alternating runs per side;"
        " each side ran once untimed first, so both read a warm page cache"
    )

    reference = sha256sum(path)
    assert hash_file(path).hex == reference, "hash_file disagrees with sha256sum"
    base_s, ours_s = best_of_each(args.runs, lambda: sha256sum(path), lambda: hash_file(path))
    verify_ratio = base_s / ours_s  # throughput ratio: ours / sha256sum
    print(f"verify  sha256sum  {base_s:7.3f} s  {size / MIB / base_s:8.1f} MiB/s")
    print(f"verify  nodeau     {ours_s:7.3f} s  {size / MIB / ours_s:8.1f} MiB/s")
    print(
        f"verify  throughput ratio ours/sha256sum = {verify_ratio:.2f}x "
        f"(goal >= {VERIFY_GOAL}x): {verdict(verify_ratio >= VERIFY_GOAL)}"
    )

    expected = ArtifactFile(path="model.bin", size_bytes=size, sha256=Sha256(hex=reference))
    child, url = start_publisher(path)
    try:
        with tempfile.TemporaryDirectory(dir=folder) as scratch, httpx.Client() as client:
            target = Path(scratch) / "download.bin"
            publisher = HttpPublisher(client)
            plain_s, pull_s = best_of_each(
                args.pull_runs,
                lambda: plain_download(client, url, target),
                lambda: nodeau_pull(publisher, url, target, expected),
            )
            assert nodeau_pull(publisher, url, target, expected).hex == reference
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    pull_ratio = pull_s / plain_s  # time ratio: ours / plain download
    print(f"pull    plain      {plain_s:7.3f} s  {size / MIB / plain_s:8.1f} MiB/s")
    print(f"pull    nodeau     {pull_s:7.3f} s  {size / MIB / pull_s:8.1f} MiB/s (incl. SHA-256)")
    print(
        f"pull    time ratio ours/plain = {pull_ratio:.2f}x "
        f"(goal <= {PULL_GOAL}x): {verdict(pull_ratio <= PULL_GOAL)}"
    )
    return 0 if verify_ratio >= VERIFY_GOAL and pull_ratio <= PULL_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
