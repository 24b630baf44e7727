"""Qualifying on the fleet: one workload per task, admitted by the real controller, then probed.

The evidence is kept in the cluster, and ``nodeau run`` then claims only what was proved. KWOK
runs no containers: each Pod is a real llama-server (SmolLM2-135M-Instruct) on its own address.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.catalog_file import catalog_json
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.qualifications import KEPT_RUNS, KubeQualificationRecords
from nodeau.adapters.kube.report_form import MachineArtifact
from nodeau.adapters.kube.reports import publish_report
from nodeau.domain.artifacts import Sha256
from nodeau.domain.catalog import Catalog
from nodeau.domain.qualification import (
    Capability,
    EvidenceBook,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
)
from nodeau.ports.cluster import ClusterError
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, report
from tests.support.real.kube_stand_in import point_pod_at, serve_pod
from tests.support.real.kubelet import ended, running_pods
from tests.support.real.llama import llama_server_binary
from tests.support.real.real_models import SMOLLM2, fetch, sha256_of

STAND_IN = "127.0.0.2"  # where the qualification Pods' model server answers
SEED = "0"


def pods(api: Any) -> list[Any]:
    listed = client.CoreV1Api(api).list_namespaced_pod(r.NAMESPACE)
    return [p for p in listed.items if p.metadata.name.startswith("service-qualify-")]


@contextmanager
def kubelet_stand_in(api: Any, binary: Path, logs: Path) -> Iterator[list[list[str]]]:
    """For each qualification Pod KWOK runs: a real llama-server with the Pod's arguments on
    ``STAND_IN``, its address in the Pod's status once it answers; stopped when the Pod
    goes. Yields the argument lists it ran."""
    ran: list[list[str]] = []
    core = client.CoreV1Api(api)

    def serve(pod: Any) -> subprocess.Popen[bytes]:
        ran.append(list(pod.spec.containers[0].args))
        process = serve_pod(binary, pod, STAND_IN, logs / f"{pod.metadata.name}-{len(ran)}.log")
        ran[-1][ran[-1].index("--host") + 1] = STAND_IN
        point_pod_at(core, pod, STAND_IN)
        return process

    with running_pods(lambda: pods(api), serve, ended):
        yield ran


def smol(path: Path) -> MachineArtifact:
    return MachineArtifact(
        id=SMOLLM2.sha256,
        names=("smol",),
        size_bytes=SMOLLM2.size_bytes,
        path=str(path),
        summary=GgufModelInspector().inspect(path),
    )


@pytest.fixture
def nodeau(cluster: Cluster, tmp_path: Path) -> Cli:
    # the user's own catalog, which does not list SmolLM2's bytes: it claims what it proves
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_json(Catalog()), encoding="utf-8")
    return Cli(
        tmp_path / "home",
        timeout_s=600,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
        NODEAU_CATALOG=str(catalog),
    )


def test_qualify_on_the_fleet_runs_as_workloads_and_keeps_its_evidence_in_the_cluster(
    fresh_fleet: client.ApiClient,
    controller_process: subprocess.Popen[str],
    nodeau: Cli,
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    model = fetch(SMOLLM2)
    add_machine(api, "m1", 1, smol(model))
    refused = nodeau("run", "smol", "--name", "chat", "--wait", "60")
    assert refused.returncode == 2, refused.stderr
    assert "qualification.task-not-proved: smol has not proved it can chat" in refused.stderr
    assert (
        client.CustomObjectsApi(api).list_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES
        )["items"]
        == []
    )  # a refusal creates nothing

    with kubelet_stand_in(api, llama_server_binary(), tmp_path) as ran:
        done = nodeau("model", "qualify", "smol", "--context", "1024", "--seed", SEED, "--json")
    assert done.returncode == 0, done.stderr + (tmp_path / "controller.log").read_text()
    view = json.loads(done.stdout)
    outcomes = {p["capability"]: p["outcome"] for p in view["probes"]}
    assert outcomes == {
        "chat": "passed",
        "tools": "failed",
        "structured-output": "passed",
        "vision-input": "failed",
        "embed": "failed",
        "rerank": "failed",
    }
    assert view["claims"] == ["chat", "structured-output"]
    assert view["card"] == "NVIDIA L4 (simulated: the model ran on the CPU)"
    assert view["runtime"].startswith("llama-server (the fleet's model-server image ")
    assert view["memory"] == []  # not read on a fleet: nothing written down
    # one Pod per task, each with the Pod's own arguments for that task
    tasks = [
        "rerank" if "--rerank" in a else "embed" if "--embeddings" in a else "chat" for a in ran
    ]
    assert tasks == ["chat", "embed", "rerank"]
    assert all(a[a.index("--model") + 1] == str(model) for a in ran)
    assert pods(api) == []  # every qualification workload is gone, its card freed

    kept = client.CoreV1Api(api).read_namespaced_config_map("nodeau-qualifications", r.NAMESPACE)
    [runs] = [json.loads(v) for k, v in kept.data.items() if k == SMOLLM2.sha256]
    assert len(runs) == 1 and runs[0]["seed"] == int(SEED)

    served = nodeau("run", "smol", "--name", "chat", "--wait", "60", "--json")
    assert served.returncode == 0, served.stderr
    embed = nodeau("run", "smol", "--name", "vectors", "--task", "embed", "--wait", "60")
    assert embed.returncode == 2
    assert "smol has not proved it can embed (its embed probe failed" in embed.stderr


def evidence_of(artifact: str, at_minute: int, chat: ProbeOutcome) -> QualificationEvidence:
    return QualificationEvidence(
        artifact_id=Sha256(hex=artifact),
        gpu_model="NVIDIA L4",
        runtime="llama-server (test)",
        at=datetime(2026, 11, 30, 20, at_minute, tzinfo=UTC),
        context_tokens=1024,
        memory=(),
        probes=(
            ProbeResult(capability=Capability.CHAT, outcome=chat, asked="a", answered="b", why="c"),
        ),
        seed=at_minute,
    )


def test_the_cluster_keeps_each_artifacts_newest_runs(fresh_fleet: client.ApiClient) -> None:
    records = KubeQualificationRecords(fresh_fleet)
    assert records.evidence() == EvidenceBook.empty()
    runs = [evidence_of("ab" * 32, m, ProbeOutcome.FAILED) for m in range(KEPT_RUNS + 2)]
    for run in runs:
        records.record_evidence(run)
    other = evidence_of("cd" * 32, 0, ProbeOutcome.PASSED)
    records.record_evidence(other)
    book = records.evidence()
    assert book.history(Sha256(hex="ab" * 32)) == tuple(runs[-KEPT_RUNS:])
    assert book.for_artifact(Sha256(hex="cd" * 32)) == other
    client.CoreV1Api(fresh_fleet).patch_namespaced_config_map(
        "nodeau-qualifications", r.NAMESPACE, {"data": {"cd" * 32: "[{not json"}}
    )
    with pytest.raises(ClusterError, match="nodeau-qualifications key cdcd"):
        records.evidence()


def test_other_bytes_under_the_same_name_start_with_no_evidence(
    fresh_fleet: client.ApiClient, nodeau: Cli, tmp_path: Path
) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 1, smol(fetch(SMOLLM2)))
    KubeQualificationRecords(api).record_evidence(
        evidence_of(SMOLLM2.sha256, 0, ProbeOutcome.PASSED)
    )
    # proved: the request goes to the controller (none runs here: it stays undecided)
    asked = nodeau("run", "smol", "--name", "chat", "--wait", "0")
    assert asked.returncode == 1, asked.stderr
    assert "did not decide on chat" in asked.stderr
    assert nodeau("stop", "chat", "--workload").returncode == 0

    other = write_tiny_llama(tmp_path / "other.gguf", seed=4)
    renamed = MachineArtifact(
        id=sha256_of(other),
        names=("smol",),
        size_bytes=other.stat().st_size,
        path=str(other),
        summary=GgufModelInspector().inspect(other),
    )
    publish_report(api, report("m1", 1, renamed))  # the machine now holds other bytes as smol
    refused = nodeau("run", "smol", "--name", "chat", "--wait", "0")
    assert refused.returncode == 2
    assert "smol has not proved it can chat (it was never qualified)" in refused.stderr
