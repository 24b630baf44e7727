"""Model copies on a real API server: ``nodeau models copy``, the real agent's fetch, ``copies``.

Each round no copy is reported ready unless all its files are on disk with the right SHA-256;
then per fault: resumed cuts, wrong bytes, a stall, the disk reserve, a ``kill -9`` of the agent
resumed from the partial file, and two copies on one machine fetched one at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.http_publisher import HttpPublisher, fetch_url
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.bootstrap_tokens import KubeBootstrapTokens
from nodeau.adapters.kube.copies import KubeModelCopies
from nodeau.adapters.kube.health_store import KubeHealthRecords
from nodeau.adapters.kube.ledger import KubeReservationLedger
from nodeau.adapters.kube.marks import KubeFleetMarks
from nodeau.adapters.kube.pods import KubeServerPods
from nodeau.adapters.kube.reports import KubeMachineReports, read_reports
from nodeau.adapters.kube.resources import CONTROL_PLANE_LABEL, SERVER_IMAGE
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.agent.agent import Agent, Link
from nodeau.apps.agent.copies import CopyWorker
from nodeau.apps.copies.commands import CopyView
from nodeau.apps.planes.kubernetes import FleetCluster, KubernetesPlane
from tests.support.builders.copy_models import (
    KIB,
    MIB,
    Model,
    catalog_of,
    gguf_model,
    write_catalog,
)
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster, api_client
from tests.support.real.kube_nodes import create_kwok_nodes, wait_for
from tests.support.real.publisher import LocalPublisher, local_publisher

MACHINE = "garage"
SIMULATED = "1 x 24 GiB"


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture(scope="module")
def models() -> dict[str, Model]:
    """Two catalog models: a tiny GGUF and a second file of a few MiB each."""
    return {
        "qwen": gguf_model("qwen", seed=11, extra=3 * MIB),
        "llama": gguf_model("llama", seed=12, extra=1 * MIB),
    }


@pytest.fixture
def publisher() -> Iterator[LocalPublisher]:
    with local_publisher() as served:
        yield served


def fleet_plane(api: client.ApiClient) -> KubernetesPlane:
    """The fleet's plane on the cluster's adapters, as ``nodeau`` builds it."""
    ports = FleetCluster(
        server="test", context="test", objects=KubeWorkloadObjects(api, identity="test"),
        marks=KubeFleetMarks(api), reports=KubeMachineReports(api),
        health=KubeHealthRecords(api), ledger=KubeReservationLedger(api),
        tokens=KubeBootstrapTokens(api), pods=KubeServerPods(api),
        control_plane_label=CONTROL_PLANE_LABEL, server_image=SERVER_IMAGE,
        copies=KubeModelCopies(api),
    )  # fmt: skip
    return KubernetesPlane(ports, clock=now)


class Machine:
    """Garage: its model store on disk, its agent (the real code, in this process), and a
    check after every round that no report counts a copy whose bytes are not verified."""

    def __init__(
        self,
        cluster: Cluster,
        root: Path,
        publisher: LocalPublisher,
        models: dict[str, Model],
        *,
        reserve_bytes: int = 0,
        stall_s: float = 30.0,
    ) -> None:
        self.root = root
        self.models = models
        self.api = api_client(cluster)
        self.http = httpx.Client()
        self.store = FilesystemModelStore(
            root / "models", MACHINE, reserve_bytes=reserve_bytes, clock=now
        )
        registry = SqliteRegistry(root / "registry.sqlite3")
        self.said: list[str] = []
        catalog = write_catalog(root / "catalog.json", *models.values())
        self.worker = CopyWorker(
            machine=MACHINE, store=self.store, registry=registry,
            publisher=HttpPublisher(self.http, chunk_bytes=128 * KIB, stall_timeout_s=stall_s),
            url_for=lambda e, f: fetch_url(e.entry, f, base_url=publisher.base_url),
            say=self.said.append, retry_pause_s=0.1,
        )  # fmt: skip
        self.agent = Agent(
            machine=MACHINE,
            connect=lambda: Link(
                server=cluster.server,
                reports=KubeMachineReports(self.api),
                copies=KubeModelCopies(self.api),
            ),
            inventory=SimulatedGpuInventory(MACHINE, SIMULATED),
            store=self.store, registry=registry, catalog=JsonCatalogFile(catalog),
            inspector=GgufModelInspector(), clock=now, copies=self.worker,
        )  # fmt: skip
        self.stop = threading.Event()
        self.rounds = 0
        self.damaged: list[str] = []
        self.thread = threading.Thread(target=self._run, name="agent-rounds")

    def _run(self) -> None:
        while not self.stop.is_set():
            self.agent.round()
            self.rounds += 1
            self._check_counted()
            self.stop.wait(0.1)

    def _check_counted(self) -> None:
        """Every model a report lists verified has every file on disk, with its SHA-256."""
        for report in read_reports(self.api):
            listed = {a.id for a in report.artifacts}
            for m in self.models.values():
                if m.artifact in listed and not files_intact(self.root, m):
                    self.damaged.append(f"{m.name} listed verified with a damaged file")

    def __enter__(self) -> Machine:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        self.agent.close()
        self.store.close()
        self.http.close()
        self.api.close()
        assert self.damaged == []


def blob(root: Path, sha: str) -> Path:
    return root / "models" / "blobs" / "sha256" / sha


def partial(root: Path, sha: str) -> Path:
    return root / "models" / "partial" / f"{sha}.part"


def files_intact(root: Path, m: Model) -> bool:
    """Whether every file of the model is held under its final name with its SHA-256."""
    for f in m.entry.entry.files:
        path = blob(root, f.sha256.hex)
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != f.sha256.hex:
            return False
    return True


def copy_of(plane: KubernetesPlane, m: Model) -> CopyView | None:
    return next(
        (
            c
            for c in plane.copies.listing().copies
            if (c.machine, c.artifact) == (MACHINE, m.artifact)
        ),
        None,
    )


def state_of(plane: KubernetesPlane, m: Model) -> str | None:
    found = copy_of(plane, m)
    return None if found is None else found.state


def settled(plane: KubernetesPlane, m: Model, what: str, timeout_s: float = 90) -> CopyView:
    wait_for(lambda: state_of(plane, m) in ("ready", "failed"), what, timeout_s)
    found = copy_of(plane, m)
    assert found is not None
    return found


@pytest.fixture
def fleet(fresh_fleet: client.ApiClient) -> KubernetesPlane:
    create_kwok_nodes(fresh_fleet, [MACHINE])
    return fleet_plane(fresh_fleet)


def cli(cluster: Cluster, tmp_path: Path, catalog: Path) -> Cli:
    return Cli(
        tmp_path / "cli-home", timeout_s=180, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig), NODEAU_CATALOG=str(catalog),
    )  # fmt: skip


def test_a_clean_copy_is_ready_only_once_every_file_is_verified(
    cluster: Cluster, fresh_fleet: client.ApiClient, fleet: KubernetesPlane,
    publisher: LocalPublisher, models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen = models["qwen"]
    qwen.serve(publisher)
    nodeau = cli(cluster, tmp_path, write_catalog(tmp_path / "catalog.json", *models.values()))
    with Machine(cluster, tmp_path / "garage", publisher, models):
        done = nodeau("models", "copy", "qwen", "--to", MACHINE, "--wait")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(f"a copy of qwen ({qwen.artifact[:12]}) on garage is asked for")
        assert lines[-1] == "qwen: verified on garage: every file's SHA-256 checked there"
        assert files_intact(tmp_path / "garage", qwen)
        [listed] = [c for c in nodeau.json("models", "copies")["copies"] if c["model"] == "qwen"]  # type: ignore[index]
        assert (listed["machine"], listed["state"], listed["asked_by"]) == (
            MACHINE, "ready", ["person"],
        )  # fmt: skip
        taken = nodeau("models", "copy", "qwen", "--to", MACHINE, "--remove")
        assert taken.returncode == 0, taken.stderr
        assert "no file is deleted" in taken.stdout
    assert files_intact(tmp_path / "garage", qwen)  # taking the request back deleted nothing
    requests = client.CoreV1Api(fresh_fleet).read_namespaced_config_map(
        r.COPIES_CONFIGMAP, r.NAMESPACE
    )
    assert json.loads(requests.data[r.COPIES_KEY]) == []


def test_cut_connections_resume_from_the_bytes_kept(
    cluster: Cluster, fleet: KubernetesPlane, publisher: LocalPublisher,
    models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen = models["qwen"]
    qwen.serve(publisher, cut_after=700 * KIB)
    fleet.copies.request("qwen", MACHINE, catalog_of(*models.values()))
    with Machine(cluster, tmp_path, publisher, models) as garage:
        view = settled(fleet, qwen, "the cut copy settling")
        assert view.state == "ready", view.sentence
        assert files_intact(tmp_path, qwen)
        ranges = publisher.ranges(qwen.path("tokenizer.json"))
        assert len(ranges) >= 4 and ranges[0] is None and all(ranges[1:])
        assert any(s.startswith("resuming qwen after: ") for s in garage.said)


def test_wrong_bytes_fail_with_the_checksum_reason_and_never_count(
    cluster: Cluster, fresh_fleet: client.ApiClient, fleet: KubernetesPlane,
    publisher: LocalPublisher, models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen = models["qwen"]
    qwen.serve(publisher, wrong_bytes=True)
    nodeau = cli(cluster, tmp_path, write_catalog(tmp_path / "catalog.json", *models.values()))
    with Machine(cluster, tmp_path / "garage", publisher, models):
        done = nodeau("models", "copy", "qwen", "--to", MACHINE, "--wait")
        assert done.returncode == 1
        failed = done.stderr.splitlines()[-1]
        assert failed.startswith(
            "nodeau: the copy of qwen on garage failed: model.gguf: wrong bytes (expected SHA-256 "
        )
        assert failed.endswith("and ask again")
    assert not blob(tmp_path / "garage", qwen.file("model.gguf").sha256.hex).exists()
    assert all(not rep.artifacts for rep in read_reports(fresh_fleet))


def test_a_stall_is_detected_and_reported(
    cluster: Cluster, fleet: KubernetesPlane, publisher: LocalPublisher,
    models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen = models["qwen"]
    qwen.serve(publisher, stall_after=0, stall_s=30.0)
    fleet.copies.request("qwen", MACHINE, catalog_of(*models.values()))
    with Machine(cluster, tmp_path, publisher, models, stall_s=0.5):
        view = settled(fleet, qwen, "the stalled copy settling")
    assert view.state == "failed"
    assert "no byte arrived for 0.5 s" in view.sentence
    assert not files_intact(tmp_path, qwen)


def test_a_copy_that_would_eat_the_disk_reserve_fails_before_its_first_byte(
    cluster: Cluster, fleet: KubernetesPlane, publisher: LocalPublisher,
    models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen = models["qwen"]
    qwen.serve(publisher)
    fleet.copies.request("qwen", MACHINE, catalog_of(*models.values()))
    with Machine(cluster, tmp_path, publisher, models, reserve_bytes=1 << 60):
        view = settled(fleet, qwen, "the copy settling")
    assert view.state == "failed"
    size = qwen.file("model.gguf").size_bytes
    assert view.sentence.startswith(
        f"model.gguf: needs {size} more bytes and only 0 are free above the reserve; nothing "
        "fetched; not retried"
    )
    assert publisher.requests == ()


def test_two_copies_on_one_machine_are_fetched_one_at_a_time(
    cluster: Cluster, fleet: KubernetesPlane, publisher: LocalPublisher,
    models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen, llama = models["qwen"], models["llama"]
    qwen.serve(publisher, stall_after=512 * KIB, stall_s=3.0)
    llama.serve(publisher)
    catalog = catalog_of(*models.values())
    fleet.copies.request("qwen", MACHINE, catalog)
    fleet.copies.request("llama", MACHINE, catalog)
    waited: set[str] = set()

    def both_ready() -> bool:
        views = {c.model: c for c in fleet.copies.listing().copies if c.machine == MACHINE}
        if "llama" in views and views["llama"].state == "waiting":
            waited.add(views["llama"].sentence)
        return all(v.state == "ready" for v in views.values()) and len(views) == 2

    with Machine(cluster, tmp_path, publisher, models):
        wait_for(both_ready, "both copies ready", 90)
    assert "waiting behind qwen: one fetch at a time on this machine" in waited
    order = [q.path for q in publisher.requests]
    last_qwen = max(i for i, p in enumerate(order) if p.startswith("/tests/qwen/"))
    first_llama = min(i for i, p in enumerate(order) if p.startswith("/tests/llama/"))
    assert last_qwen < first_llama, order
    assert files_intact(tmp_path, qwen) and files_intact(tmp_path, llama)


def agent_process(
    cluster: Cluster, home: Path, catalog: Path, publisher: LocalPublisher, log: Path
) -> subprocess.Popen[bytes]:
    """``python -m nodeau.apps.agent`` for garage, as the DaemonSet runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
    env.update(
        NODEAU_HOME=str(home), NODEAU_SIMULATED_GPUS=SIMULATED, NODEAU_DISK_RESERVE_BYTES="0",
        NODEAU_CATALOG=str(catalog), NODEAU_PUBLISHER_URL=publisher.base_url,
    )  # fmt: skip
    args = [sys.executable, "-m", "nodeau.apps.agent", "--kubeconfig", str(cluster.kubeconfig),
            "--machine", MACHINE, "--interval", "0.2"]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_a_kill_9_mid_fetch_is_resumed_by_the_next_agent_from_the_partial_file(
    cluster: Cluster, fleet: KubernetesPlane, publisher: LocalPublisher,
    models: dict[str, Model], tmp_path: Path,
) -> None:  # fmt: skip
    qwen = models["qwen"]
    weights, rest = qwen.file("model.gguf"), qwen.file("tokenizer.json")
    publisher.serve(qwen.path("model.gguf"), qwen.data["model.gguf"])
    publisher.serve(qwen.path("tokenizer.json"), qwen.data["tokenizer.json"],
                    stall_after=MIB + 512 * KIB, stall_s=60.0)  # fmt: skip
    home, log = tmp_path / "home", tmp_path / "agent.log"
    catalog = write_catalog(tmp_path / "catalog.json", *models.values())
    fleet.copies.request("qwen", MACHINE, catalog_of(*models.values()))
    first = agent_process(cluster, home, catalog, publisher, log)
    try:
        wanted = weights.size_bytes + MIB

        def fetching_past_a_mib() -> bool:
            view = copy_of(fleet, qwen)
            return (
                view is not None and view.state == "fetching" and (view.bytes_done or 0) >= wanted
            )

        wait_for(fetching_past_a_mib, "the first agent fetching the second file", 90)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    kept = partial(home, rest.sha256.hex).stat().st_size
    assert 0 < kept < rest.size_bytes
    assert blob(home, weights.sha256.hex).is_file()  # the first file was verified before the kill
    publisher.serve(qwen.path("tokenizer.json"), qwen.data["tokenizer.json"])  # no more stall
    second = agent_process(cluster, home, catalog, publisher, log)
    try:
        view = settled(fleet, qwen, "the next agent finishing the copy")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    assert view.state == "ready", view.sentence
    assert files_intact(home, qwen)
    assert publisher.ranges(qwen.path("tokenizer.json")) == [None, f"bytes={kept}-"]
    assert publisher.ranges(qwen.path("model.gguf")) == [None]  # verified: never fetched again
    assert "Traceback" not in log.read_text()
