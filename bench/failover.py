"""Benchmark: controller failover, from the leader's last renewal to the standby's acquisition.

Usage: python bench/failover.py [--rounds 3]
Two controllers on the test control plane; each round SIGKILLs the leader. Prints each failover
and the median against the 15 s goal as a ratio (the floor is the 12 s lease: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import config  # noqa: E402

from nodeau.domain.leadership import DEFAULT_DURATION_S  # noqa: E402
from tests.kube.test_leader_election import holder, lease_of, start_controller  # noqa: E402
from tests.support.real.kube_apply import apply_manifests  # noqa: E402
from tests.support.real.kube_cluster import ControlPlane  # noqa: E402
from tests.support.real.kube_controller import add_machine, create, small, status  # noqa: E402
from tests.support.real.kube_nodes import wait_for  # noqa: E402

DEPLOY = ROOT / "deploy"
GOAL_S = 15.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures: list[float] = []
    with tempfile.TemporaryDirectory() as work:
        plane = ControlPlane(Path(work))
        processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            cluster = plane.start()
            api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
            apply_manifests(api, [DEPLOY / "00-namespace.yaml", DEPLOY / "10-crds.yaml"])
            for machine in ("m1", "m2"):
                add_machine(api, machine, args.rounds + 1, small(machine))
            for name in ("c0", "c1"):
                processes[name] = start_controller(cluster, name, Path(work) / f"{name}.log")
            wait_for(lambda: holder(api) in processes, "a controller leads", 30)
            for n in range(args.rounds):
                leader = str(holder(api))
                processes[leader].send_signal(signal.SIGKILL)
                processes.pop(leader).wait(timeout=10)
                last = lease_of(api).spec
                assert last.holder_identity == leader, "the Lease changed hands before the kill"
                create(api, f"after-{n}", "qwen")
                wait_for(lambda: holder(api) in processes, "the standby takes over", 90)
                taken = lease_of(api).spec
                name = f"after-{n}"
                wait_for(lambda: bool(status(api, name).get("decidedBy")), "decided", 60)  # noqa: B023
                figure = (taken.acquire_time - last.renew_time).total_seconds()
                figures.append(figure)
                print(
                    f"round {n + 1}: {leader} killed; {taken.holder_identity} took the Lease "
                    f"{figure:.2f} s after {leader}'s last renewal ({figure / GOAL_S:.2f}x the "
                    f"{GOAL_S:g} s goal) and decided after-{n}"
                )
                fresh = f"c{n + 2}"
                processes[fresh] = start_controller(cluster, fresh, Path(work) / f"{fresh}.log")
                time.sleep(1)  # the fresh standby reads the Lease once before the next kill
        finally:
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
            plane.stop()
    median = statistics.median(figures)
    print(
        f"\nfailover: median {median:.2f} s, worst {max(figures):.2f} s over {len(figures)} "
        f"rounds = {median / GOAL_S:.2f}x (worst {max(figures) / GOAL_S:.2f}x) the {GOAL_S:g} s "
        f"goal; the floor with a {DEFAULT_DURATION_S:g} s lease is "
        f"{DEFAULT_DURATION_S / GOAL_S:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
