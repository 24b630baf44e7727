"""Benchmark: ``nodeau server install`` cold and cached, against a bare CMake build.

Usage: python bench/server_install.py [--backend cpu|cuda] [--cuda-arch 90] [--jobs N]
In a fresh cache; prints cold/baseline (goal at most 1.10x) and cached/cold. A CUDA run takes
over an hour on 2 cores (method: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from nodeau.adapters.cuda_toolkit import found_toolkit, wheel_toolkit
from nodeau.adapters.llama_build import LLAMA_CPP_PYTHON, TARGETS, cmake_flags
from nodeau.domain.model_server import BuildAsk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.cli import timed

NODEAU = Path(sys.executable).parent / "nodeau"
GOAL = 1.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--cuda-arch", default="90")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    ask = BuildAsk(
        backend=args.backend, cuda_archs=(args.cuda_arch,) if args.backend == "cuda" else ()
    )
    options = ["--cpu"] if ask.backend == "cpu" else ["--cuda-arch", args.cuda_arch]
    with tempfile.TemporaryDirectory(prefix="server-install-bench-") as folder:
        cache = Path(folder) / "cache"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "CCACHE_DISABLE": "1"}
        env.pop("NODEAU_LLAMA_CACHE", None)
        install = [str(NODEAU), "server", "install", *options, "--jobs", str(args.jobs), "--json"]
        cold = timed(install, env)
        cached = timed(install, env)
        source = (
            cache / "nodeau" / "llama-server" / LLAMA_CPP_PYTHON / "src" / "vendor" / "llama.cpp"
        )
        toolkit = None
        if ask.backend == "cuda":
            toolkit = found_toolkit(env) or wheel_toolkit(
                cache / "nodeau" / "cuda", environ=env, progress=lambda *_: None
            )
        build = Path(folder) / "baseline"
        flags = cmake_flags(ask, toolkit=toolkit, driver=None, ccache=None)
        baseline = timed(["cmake", "-S", str(source), "-B", str(build), *flags], env)
        baseline += timed(
            ["cmake", "--build", str(build), "--target", *TARGETS, "-j", str(args.jobs)], env
        )
        shutil.rmtree(build, ignore_errors=True)
    print(f"nodeau server install {' '.join(options)} ({args.jobs} jobs, ccache off)")
    print(f"  cold      {cold:8.1f} s  (fetch, unpack, configure, compile, ask the binary)")
    print(f"  cached    {cached:8.1f} s  (the finished build reused)")
    print(f"  baseline  {baseline:8.1f} s  (cmake configure + build of the same tree by hand)")
    ratio = cold / baseline
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"  cold / baseline {ratio:.3f}x (goal <= {GOAL:.2f}x: {verdict})")
    print(f"  cached / cold   {cached / cold:.4f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
