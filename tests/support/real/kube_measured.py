"""A machine whose memory is measured on a fleet on a real API server.

``Machine``: a KWOK node whose agent is the real code over ``FakeNvml`` and a test ``/proc``;
``kubelet_and_nvml`` runs each qualification Pod as a real llama-server in its cgroup and card.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from nodeau.adapters.catalog_file import JsonCatalogFile, catalog_json
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.reports import KubeMachineReports
from nodeau.adapters.kube.resources import CUDA_SERVER_IMAGE
from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.adapters.pod_cgroup import ProcCgroupPods
from nodeau.adapters.server_abilities import from_answer
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.agent.agent import Agent, Link
from nodeau.apps.agent.memory import PodMemoryWatch
from nodeau.apps.models.actions import import_model
from nodeau.domain.catalog import Catalog
from nodeau.domain.memory import GIB, MIB
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_nvml import FakeNvml
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_nodes import create_kwok_nodes
from tests.support.real.kube_stand_in import point_pod_at, serve_pod
from tests.support.real.kubelet import ended, running_pods
from tests.support.real.llama import llama_server_binary

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
        ended(process)
        machine.off_card(process.pid)

    with running_pods(lambda: qualification_pods(api), serve, end):
        yield served
