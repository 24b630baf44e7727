"""Two controller processes on one API server: many GPUServices, few cards, no card shared.

They elect a leader (docs/adr/0015), which is stopped half-way (SIGTERM) so the other takes over;
every object is decided, every card held by one workload, the rest refused for capacity.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from nodeau.adapters.kube.pods import list_pods
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import (
    add_machine,
    create,
    gpu_uuid,
    holder,
    ledger,
    small,
    status,
)
from tests.support.real.kube_nodes import wait_for

MACHINES = {"m1": 3, "m2": 2}  # within the Home plan: these controllers trust no test key
SERVICES = 14
FIRST = 3  # decided by the first leader, before the handover


def start(cluster: Cluster, identity: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "nodeau.apps.controller", "--kubeconfig",
             str(cluster.kubeconfig), "--identity", identity, "--resync", "2"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def test_two_controllers_never_put_two_workloads_on_one_card(
    cluster: Cluster, fresh_fleet: Any, tmp_path: Path
) -> None:
    api = fresh_fleet
    for machine, cards in MACHINES.items():
        add_machine(api, machine, cards, small(machine))
    cards = {gpu_uuid(m, i) for m, n in MACHINES.items() for i in range(n)}
    names = [f"svc-{i:02d}" for i in range(SERVICES)]
    controllers = [start(cluster, f"c{i}", tmp_path / f"c{i}.log") for i in (1, 2)]
    try:
        wait_for(lambda: holder(api) in {"c1", "c2"}, "a controller leads", 30)
        first = holder(api)
        for name in names[:FIRST]:
            create(api, name, "qwen")
        wait_for(lambda: all(status(api, n).get("decidedBy") for n in names[:FIRST]), "decided", 60)
        controllers[int(str(first)[1]) - 1].send_signal(signal.SIGTERM)
        second = "c2" if first == "c1" else "c1"
        wait_for(lambda: holder(api) == second, "the other controller takes over", 30)
        for name in names[FIRST:]:
            create(api, name, "qwen")

        def settled() -> bool:
            states = Counter(status(api, n).get("state") for n in names)
            return states["serving"] == len(cards) and states["refused"] == SERVICES - len(cards)

        wait_for(settled, "every service serving or refused", timeout_s=120)
        held = ledger(api)
        assert sorted(x.gpu_uuid for x in held) == sorted(cards)  # each card once, all used
        pods = list_pods(api)
        assert len(pods) == len(cards)
        assert sorted(p.gpu_uuid or "" for p in pods) == sorted(cards)
        by_workload = {x.workload: x for x in held}
        for pod in pods:
            reservation = by_workload[pod.workload]
            assert (pod.node, pod.gpu_uuid) == (reservation.machine, reservation.gpu_uuid)
            st = status(api, pod.workload)
            assert (st["machine"], st["gpuUUID"]) == (reservation.machine, reservation.gpu_uuid)
        for name in set(names) - set(by_workload):
            refusal = status(api, name)["refusal"]
            assert (refusal["kind"], refusal["code"]) == ("capacity", "capacity.no-free-card")
        assert {status(api, n)["decidedBy"] for n in names[:FIRST]} == {first}
        assert {status(api, n)["decidedBy"] for n in by_workload} == {first, second}
    finally:
        for process in controllers:
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=30) for process in controllers]
    logs = [(tmp_path / f"c{i}.log").read_text() for i in (1, 2)]
    assert codes == [0, 0], logs
    assert all("stopped" in log for log in logs)
