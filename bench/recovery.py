"""Recovery's timeline on KWOK with real model servers, in the seed's terms.

Usage: NODEAU_LLAMA_SERVER=... .venv/bin/python bench/recovery.py [--delay 20] [--runs 1]
A machine goes off the network; goals: noticed 15 s after both signals are quiet, moved 2 s
after its delay, serving again within the stand-in's ready time + 2 s (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attrs import evolve  # noqa: E402
from kubernetes import client, utils  # noqa: E402

from nodeau.adapters.kube import resources as r  # noqa: E402
from nodeau.adapters.kube.health_store import read_health  # noqa: E402
from nodeau.adapters.kube.report_form import MachineArtifact  # noqa: E402
from nodeau.adapters.kube.reports import publish_report  # noqa: E402
from nodeau.adapters.llama_server import find_llama_server  # noqa: E402
from nodeau.adapters.record_json import from_plain  # noqa: E402
from nodeau.apps.controller.bootstrap import kube_controller  # noqa: E402
from nodeau.domain.health import Health  # noqa: E402
from nodeau.domain.memory import GIB  # noqa: E402
from nodeau.ports.state import WorkloadRecord  # noqa: E402
from tests.kube.conftest import BASE_MANIFESTS, DEPLOY, api_client, wait_established  # noqa: E402
from tests.support.builders.tiny_gguf import write_tiny_llama  # noqa: E402
from tests.support.real.kube_cluster import ControlPlane  # noqa: E402
from tests.support.real.kube_controller import SUMMARY, create, report, status  # noqa: E402
from tests.support.real.kube_lossy import LossyMachine  # noqa: E402
from tests.support.real.kube_nodes import kwok_node  # noqa: E402
from tests.support.real.upstream import free_port  # noqa: E402

STAND_IN = {"l1": "127.0.0.2", "c": "127.0.0.3"}
SHA = "a1" * 32
AGENT_EVERY_S = 10.0
POLL_S = 0.05


def now() -> datetime:
    return datetime.now(UTC)


class Machines:
    """The agents (reports) and the kubelets' missing part (the stand-in model servers)."""

    def __init__(self, api: Any, binary: Path, model: Path, logs: Path) -> None:
        self.api, self.binary, self.model, self.logs = api, binary, model, logs
        self.quiet: set[str] = set()
        self.servers: dict[str, subprocess.Popen[bytes]] = {}
        self.ready_s: dict[str, float] = {}
        self.stop = threading.Event()

    def artifact(self) -> MachineArtifact:
        return MachineArtifact(
            id=SHA, names=("tiny",), size_bytes=4 * GIB, path=str(self.model), summary=SUMMARY
        )

    def agents(self) -> None:
        reports = {m: report(m, 1, self.artifact()) for m in STAND_IN}
        while not self.stop.is_set():
            for machine, rep in reports.items():
                if machine not in self.quiet:
                    publish_report(self.api, evolve(rep, at=now()))
            self.stop.wait(AGENT_EVERY_S)

    def kubelets(self) -> None:
        core = client.CoreV1Api(self.api)
        given: set[str] = set()
        while not self.stop.is_set():
            try:
                pod = core.read_namespaced_pod("service-auto", r.NAMESPACE)
            except client.ApiException:
                pod = None
            node = None if pod is None else pod.spec.node_name
            if pod is not None and node in STAND_IN and not pod.metadata.deletion_timestamp:
                self.start_server(node)
                key = f"{pod.metadata.uid}"
                if key not in given and pod.status.phase == "Running" and self.answers(node):
                    address = STAND_IN[node]
                    core.patch_namespaced_pod_status(
                        "service-auto",
                        r.NAMESPACE,
                        [
                            {"op": "replace", "path": "/status/podIP", "value": address},
                            {"op": "replace", "path": "/status/podIPs", "value": [{"ip": address}]},
                        ],
                    )
                    given.add(key)
            self.stop.wait(POLL_S)

    def start_server(self, machine: str) -> None:
        if machine in self.servers:
            return
        host = STAND_IN[machine]
        log = (self.logs / f"llama-{machine}.log").open("wb")
        started = time.monotonic()
        self.servers[machine] = subprocess.Popen(
            [str(self.binary), "-m", str(self.model), "--host", host,
             "--port", str(r.SERVER_PORT), "-c", "256", "-np", "1"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        log.close()
        while not self.answers(machine):
            time.sleep(0.01)
        self.ready_s[machine] = time.monotonic() - started

    def answers(self, machine: str) -> bool:
        try:
            url = f"http://{STAND_IN[machine]}:{r.SERVER_PORT}/health"
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def end(self) -> None:
        self.stop.set()
        for process in self.servers.values():
            process.terminate()
            process.wait(timeout=30)


def record(api: Any) -> WorkloadRecord | None:
    raw = status(api, "auto").get("record")
    return None if raw is None else from_plain(raw, WorkloadRecord, "auto")


def chat(endpoint: str) -> bool:
    try:
        answer = httpx.post(
            f"{endpoint}/chat/completions",
            json={
                "model": "auto",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2,
            },
            timeout=10,
        )
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


def until(predicate: Any, what: str, bound_s: float = 300) -> float:
    deadline = time.monotonic() + bound_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {bound_s} s: {what}")
        time.sleep(POLL_S)
    return time.time()


def one_run(work: Path, binary: Path, delay_s: int) -> dict[str, float]:
    plane = ControlPlane(work / "kube")
    (work / "kube").mkdir()
    cluster = plane.start()
    machines: Machines | None = None
    lossy: LossyMachine | None = None
    endpoint_process: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    try:
        api = api_client(cluster)
        for manifest in BASE_MANIFESTS:
            utils.create_from_yaml(api, str(DEPLOY / manifest))
        wait_established(api, (f"{r.GPUSERVICES}.{r.GROUP}", f"{r.BATCHJOBS}.{r.GROUP}"))
        model = work / "tiny.gguf"
        write_tiny_llama(model)
        machines = Machines(api, binary, model, work)
        lossy = LossyMachine(cluster, api, "l1", 0)
        for target in (machines.agents, machines.kubelets):
            threading.Thread(target=target, daemon=True).start()
        ctl = kube_controller(api, clock=now, identity="bench", log=lambda _line: None)
        threading.Thread(target=ctl.run, args=(10.0, stop), daemon=True).start()
        create(api, "auto", "tiny", recovery="automatic", recoveryAfterSeconds=delay_s)
        until(lambda: (rec := record(api)) is not None and rec.workload.machine == "l1", "placed")
        client.CoreV1Api(api).create_node(kwok_node("c"))  # where it can go, with its copy
        port = free_port()
        endpoint_process = subprocess.Popen(
            [sys.executable, "-m", "nodeau.apps.endpoint", "--workload", "auto",
             "--port", str(port), "--fleet", "--kubeconfig", str(cluster.kubeconfig)],
            stdout=(work / "endpoint.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        endpoint = f"http://127.0.0.1:{port}/v1"
        until(lambda: chat(endpoint), "serving on l1 through the loopback endpoint")
        time.sleep(AGENT_EVERY_S)  # a quiet moment after the last renewals

        off_at = time.time()
        lossy.off()
        machines.quiet.add("l1")
        noticed_at = until(
            lambda: (h := read_health(api).get("l1")) is not None and h.state is Health.UNREACHABLE,
            "l1 unreachable",
        )
        since = read_health(api)["l1"].since
        assert since is not None
        until(lambda: (rec := record(api)) is not None and rec.workload.machine == "c", "moved")
        moved = record(api)
        assert moved is not None and moved.workload.last_recovery is not None
        decided = moved.workload.last_recovery.at
        serving_at = until(lambda: chat(endpoint), "serving on c through the same address")
        return {
            "off_to_noticed_s": noticed_at - off_at,
            "quiet_to_noticed_s": noticed_at - since.timestamp(),
            "decided_late_s": (decided - (since + timedelta(seconds=delay_s))).total_seconds(),
            "decision_to_serving_s": serving_at - decided.timestamp(),
            "ready_s": machines.ready_s["c"],
        }
    finally:
        stop.set()
        if endpoint_process is not None:
            endpoint_process.terminate()
            endpoint_process.wait(timeout=30)
        if machines is not None:
            machines.end()
        if lossy is not None:
            lossy.stop()
        plane.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=int, default=20, help="the recovery delay, seconds")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    binary = find_llama_server(os.environ)
    if binary is None or not binary.is_file():
        raise SystemExit(
            "no llama-server: run `nodeau server install --cpu` or set NODEAU_LLAMA_SERVER"
        )
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="nodeau-recovery-bench-") as tmp:
            f = one_run(Path(tmp), binary, args.delay)
        serving_goal = f["ready_s"] + 2.0
        print(f"run {i + 1} (delay {args.delay} s)")
        print(f"  off the network -> noticed   {f['off_to_noticed_s']:6.2f} s  (the seed: 47 s)")
        print(
            f"  both quiet -> noticed        {f['quiet_to_noticed_s']:6.2f} s  goal 15 s: "
            f"{f['quiet_to_noticed_s'] / 15:.2f}x"
        )
        print(
            f"  decided after the delay      {f['decided_late_s']:6.2f} s  goal 2 s: "
            f"{max(f['decided_late_s'], 0) / 2:.2f}x"
        )
        print(
            f"  decision -> serving          {f['decision_to_serving_s']:6.2f} s  goal "
            f"{serving_goal:.2f} s (its model server's ready time {f['ready_s']:.2f} s + 2 s): "
            f"{f['decision_to_serving_s'] / serving_goal:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
