"""Measured memory on the fleet: the agent reports what each Pod's model server holds on its
card, fleet qualification records the peak of its own Pods, and the real controller (its own
ServiceAccount, deploy/'s RBAC) admits a later ``nodeau run`` of the same artifact and
configuration labelled measured, reserving that peak.

The machine is a KWOK node whose agent is the real agent code (``Agent`` with its
``PodMemoryWatch``) run in this process: its cards are the NVML adapter over ``FakeNvml``
(the contract-checked stand-in for ``pynvml``), and its ``/proc`` a folder this test writes.
KWOK runs no containers, so each qualification Pod is stood in for by a real llama-server
with the Pod's arguments; as its kubelet and NVML would, the test then puts that process's
PID in the Pod's cgroup (a cgroup v2 file of the systemd driver, naming the Pod's UID) and on
the card with a figure of its own per task. That a real card's NVML lists a real Pod's
server is proven only on a machine with a card (docs/adr/0010).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.catalog_file import JsonCatalogFile, catalog_json
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.qualifications import MEASUREMENTS_CONFIGMAP, KubeQualificationRecords
from nodeau.adapters.kube.reports import KubeMachineReports, read_reports
from nodeau.adapters.kube.resources import CUDA_SERVER_IMAGE
from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.adapters.pod_cgroup import ProcCgroupPods
from nodeau.adapters.server_abilities import from_answer
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.agent.agent import Agent, Link
from nodeau.apps.agent.memory import PodMemoryWatch
from nodeau.apps.models import import_model
from nodeau.domain.catalog import Catalog
from nodeau.domain.memory import GIB, MIB, MeasuredKey, MeasuredTable, Measurement
from nodeau.ports.cluster import ClusterError
from tests.contract.test_gpu_inventory import FakeNvml
from tests.kube.test_whole_path import controller_process  # noqa: F401 (a fixture)
from tests.support.cli import Cli
from tests.support.kube_cluster import Cluster
from tests.support.kube_nodes import create_kwok_nodes, wait_for
from tests.support.kube_stand_in import point_pod_at, serve_pod
from tests.support.llama import llama_server_binary
from tests.support.tiny_gguf import write_tiny_llama

MACHINE = "m1"
CARD = "NVIDIA L4"
GPU = "GPU-0f1e2d3c-aaaa-bbbb-cccc-ddddeeeeffff"
STAND_IN = "127.0.0.5"  # where this test's qualification Pods answer (not the other tests')
CONTEXT = "256"
# what NVML says each task's model server holds on the card
HELD = {"chat": 610 * MIB, "embed": 530 * MIB, "rerank": 545 * MIB}


def now() -> datetime:
    return datetime.now(UTC)


def task_of(args: list[str]) -> str:
    return "rerank" if "--rerank" in args else "embed" if "--embeddings" in args else "chat"


class Machine:
    """m1: a KWOK node, its model store with the tiny model, and its agent's rounds."""

    def __init__(self, api: Any, cluster: Cluster, root: Path) -> None:
        self.proc = root / "proc"
        self.proc.mkdir(parents=True)
        self.nvml = FakeNvml([{"uuid": GPU, "name": CARD, "total": 24 * GIB, "free": 24 * GIB}])
        store = FilesystemModelStore(root / "models", MACHINE, reserve_bytes=0, clock=now)
        registry = SqliteRegistry(root / "registry.sqlite3")
        model = write_tiny_llama(root / "tiny.gguf", seed=3, quant="q8_0")
        import_model(model, alias="tiny", register=True, inspector=GgufModelInspector(),
                     store=store, registry=registry)  # fmt: skip
        catalog = root / "catalog.json"
        catalog.write_text(catalog_json(Catalog()), encoding="utf-8")
        inventory = NvmlGpuInventory(MACHINE, nvml=self.nvml)
        self.watch = PodMemoryWatch(
            processes=inventory, pods=ProcCgroupPods(self.proc), clock=now, interval_s=0.1
        )
        self.agent = Agent(
            machine=MACHINE,
            connect=lambda: Link(server=cluster.server, reports=KubeMachineReports(api)),
            inventory=inventory, store=store, registry=registry,
            catalog=JsonCatalogFile(catalog), inspector=GgufModelInspector(), clock=now,
            memory=self.watch,
            # what the CUDA image's probe says on a machine with this card
            server=lambda: from_answer(
                "version: 0.5.0-dev (build 1, commit 0c1e570)\n"
                f"Available devices:\n  CUDA0: {CARD} (24576 MiB, 24000 MiB free)\n",
                CUDA_SERVER_IMAGE,
            ),
        )  # fmt: skip
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._rounds, name="m1-agent")
        create_kwok_nodes(api, [MACHINE])

    def _rounds(self) -> None:
        while not self.stop.is_set():
            self.agent.round()
            self.stop.wait(0.3)

    def on_card(self, pid: int, pod_uid: str, held: int) -> None:
        """Process ``pid`` in Pod ``pod_uid`` (its cgroup) holding ``held`` bytes on the card."""
        folder = self.proc / str(pid)
        folder.mkdir()
        escaped = pod_uid.replace("-", "_")
        (folder / "cgroup").write_text(
            "0::/kubepods.slice/kubepods-besteffort.slice/"
            f"kubepods-besteffort-pod{escaped}.slice/cri-containerd-{pid:064x}.scope\n",
            encoding="utf-8",
        )
        self.nvml.processes = {0: [*self.nvml.processes.get(0, []), (pid, held)]}

    def off_card(self, pid: int) -> None:
        self.nvml.processes = {0: [p for p in self.nvml.processes.get(0, []) if p[0] != pid]}

    def __enter__(self) -> Machine:
        self.watch.start()
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        self.agent.close()


def qualification_pods(api: Any) -> list[Any]:
    listed: Any = client.CoreV1Api(api).list_namespaced_pod(r.NAMESPACE)
    return [p for p in listed.items if p.metadata.name.startswith("service-qualify-")]


@contextmanager
def kubelet_and_nvml(api: Any, machine: Machine, logs: Path) -> Iterator[list[tuple[str, str]]]:
    """For each qualification Pod KWOK runs: a real llama-server with the Pod's arguments on
    ``STAND_IN``, put in the Pod's cgroup and on the card with its task's figure, its address
    in the Pod's status once it answers; stopped (and off the card) when the Pod goes.
    Yields the UID and task of each Pod it served."""
    served: list[tuple[str, str]] = []
    stop = threading.Event()
    core = client.CoreV1Api(api)
    binary = llama_server_binary()

    def serve(pod: Any) -> subprocess.Popen[bytes]:
        log = logs / f"{pod.metadata.name}-{len(served)}.log"
        task = task_of(list(pod.spec.containers[0].args))
        process = serve_pod(binary, pod, STAND_IN, log)
        served.append((pod.metadata.uid, task))
        machine.on_card(process.pid, pod.metadata.uid, HELD[task])
        point_pod_at(core, pod, STAND_IN)
        return process

    def end(process: subprocess.Popen[bytes]) -> None:
        process.terminate()
        process.wait(timeout=30)
        machine.off_card(process.pid)

    def watch() -> None:
        running: dict[str, subprocess.Popen[bytes]] = {}
        while not stop.is_set():
            now_ = {
                p.metadata.uid: p
                for p in qualification_pods(api)
                if p.metadata.deletion_timestamp is None
            }
            for uid in [u for u in running if u not in now_]:
                end(running.pop(uid))
            for uid, pod in now_.items():
                if uid not in running and pod.status.phase == "Running":
                    running[uid] = serve(pod)
            time.sleep(0.2)
        for process in running.values():
            end(process)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        stop.set()
        thread.join(timeout=60)


def service(api: Any, name: str) -> Any:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


@pytest.fixture
def nodeau(cluster: Cluster, tmp_path: Path) -> Cli:
    catalog = tmp_path / "user-catalog.json"
    catalog.write_text(catalog_json(Catalog()), encoding="utf-8")
    return Cli(
        tmp_path / "home", timeout_s=600, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig), NODEAU_CATALOG=str(catalog),
    )  # fmt: skip


def test_a_qualified_pods_peak_is_measured_and_a_later_run_is_admitted_measured(
    fresh_fleet: client.ApiClient,
    cluster: Cluster,
    controller_process: subprocess.Popen[str],  # noqa: F811 (the fixture imported above)
    nodeau: Cli,
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    with Machine(api, cluster, tmp_path / "m1") as machine:
        wait_for(lambda: [rep.machine for rep in read_reports(api)] == [MACHINE], "m1's report")
        with kubelet_and_nvml(api, machine, tmp_path) as served:
            done = nodeau("model", "qualify", "tiny", "--context", CONTEXT, "--seed", "0",
                          "--json")  # fmt: skip
        log = (tmp_path / "controller.log").read_text()
        assert done.returncode == 0, done.stderr + log
        view = json.loads(done.stdout)
        assert view["card"] == CARD  # a card, not a simulated one
        memory = {m["task"]: m for m in view["memory"]}
        assert {t: m["peak_bytes"] for t, m in memory.items()} == HELD
        assert all(m["source"] == "nvml" and m["measured"] for m in memory.values())
        assert all(f"ctx={CONTEXT}," in m["config"] for m in memory.values())
        assert [task for _, task in served] == ["chat", "embed", "rerank"]
        assert qualification_pods(api) == []

        # the agent reported each Pod by its UID on the card, at what NVML said it held
        [report] = read_reports(api)
        assert {(p.pod_uid, p.gpu_uuid, p.peak_bytes) for p in report.pods} == {
            (uid, GPU, HELD[task]) for uid, task in served
        }

        # the measurements are in the cluster, keyed like one machine's
        table = KubeQualificationRecords(api).measurements()
        artifact = view["artifact"]
        assert {
            (m.key.artifact_id, m.key.gpu_model, m.key.config_key, m.peak_bytes)
            for m in table.measurements
        } == {(artifact, CARD, memory[t]["config"], HELD[t]) for t in HELD}

        # a run in the measured configuration: admitted by the real controller, measured
        run = nodeau("run", "tiny", "--name", "chat", "--context", CONTEXT, "--unproved",
                     "--wait", "60", "--json")  # fmt: skip
        assert run.returncode == 0, run.stderr + (tmp_path / "controller.log").read_text()
        started = json.loads(run.stdout)
        assert (started["source"], started["reserved_bytes"]) == ("measured", HELD["chat"])
        # another context was never measured: estimated (once the card is free again)
        assert nodeau("stop", "chat", "--workload").returncode == 0
        wait_for(lambda: service(api, "chat") is None, "chat gone (its card freed first)")
        other = nodeau("run", "tiny", "--name", "wide", "--context", "128", "--unproved",
                       "--wait", "60", "--json")  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert json.loads(other.stdout)["source"] == "estimated"


def test_the_cluster_keeps_the_newest_measurement_of_each_key(
    fresh_fleet: client.ApiClient,
) -> None:
    """The adapter's side of it: no measurement is kept until one is recorded, a newer one of
    the same key replaces the older, other keys stay, and a value that does not read is a
    one-line error naming its key."""
    records = KubeQualificationRecords(fresh_fleet)
    assert records.measurements() == MeasuredTable()
    key = MeasuredKey(artifact_id="ab" * 32, gpu_model=CARD, config_key="task=chat,ctx=256")
    other = MeasuredKey(artifact_id="ab" * 32, gpu_model=CARD, config_key="task=chat,ctx=512")
    records.record_measurement(Measurement(key=key, peak_bytes=GIB, note="first"))
    records.record_measurement(Measurement(key=other, peak_bytes=2 * GIB))
    records.record_measurement(Measurement(key=key, peak_bytes=3 * GIB, note="again"))
    table = records.measurements()
    assert table.lookup(key) == Measurement(key=key, peak_bytes=3 * GIB, note="again")
    assert table.lookup(other) == Measurement(key=other, peak_bytes=2 * GIB)
    assert len(table.measurements) == 2
    client.CoreV1Api(fresh_fleet).patch_namespaced_config_map(
        MEASUREMENTS_CONFIGMAP, r.NAMESPACE, {"data": {"cd" * 32: "[{not json"}}
    )
    with pytest.raises(ClusterError, match=f"{MEASUREMENTS_CONFIGMAP} key cdcd"):
        records.measurements()
