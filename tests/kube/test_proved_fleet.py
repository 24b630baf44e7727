"""A GPUService applied by hand is checked by the controller as ``nodeau run`` checks it.

Refused for a task its model has not proved (the CLI's words in its status and ``ps``);
admitted with ``unproved: true``, or when qualification evidence or the catalog proves it.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.qualifications import KubeQualificationRecords
from nodeau.apps.settings import shipped_catalog
from nodeau.domain.artifacts import Sha256
from nodeau.domain.qualification import (
    Capability,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
)
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, artifact, small, status
from tests.support.real.kube_nodes import wait_for

CODE = "qualification.task-not-proved"
QUALIFIED_ID = "ef" * 32  # "mistral": chat proved on the fleet, embed failed


def apply(api: Any, name: str, model: str, **spec: Any) -> None:
    """A GPUService as a person writes it for kubectl: nothing but what they typed."""
    body = {
        "apiVersion": r.API_VERSION,
        "kind": r.GPUSERVICE_KIND,
        "metadata": {"name": name, "namespace": r.NAMESPACE},
        "spec": {"model": model, **spec},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, body
    )


def mistral_run() -> QualificationEvidence:
    return QualificationEvidence(
        artifact_id=Sha256(hex=QUALIFIED_ID),
        gpu_model="NVIDIA L4",
        runtime="llama-server (test)",
        at=datetime(2026, 11, 30, 20, 5, tzinfo=UTC),
        context_tokens=1024,
        memory=(),
        probes=(
            ProbeResult(capability=Capability.CHAT, outcome=ProbeOutcome.PASSED,
                        asked="say the code word", answered="the code word", why="it said it"),
            ProbeResult(capability=Capability.EMBED, outcome=ProbeOutcome.FAILED,
                        asked="three pairs", answered="500", why="no embeddings"),
        ),
        seed=7,
    )  # fmt: skip


def cli_sentence(cli: Cli, *args: str) -> str:
    """What ``nodeau run`` on the fleet prints after the code when it refuses (exit 2)."""
    done = cli("run", *args, "--wait", "60")
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [x for x in done.stderr.splitlines() if f"{CODE}: " in x]
    return line.split(f"{CODE}: ", 1)[1]


def test_a_gpuservice_applied_by_hand_is_refused_for_a_task_it_has_not_proved(
    cluster: Cluster,
    fresh_fleet: client.ApiClient,
    controller_process: subprocess.Popen[str],
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    [smol] = JsonCatalogFile(shipped_catalog()).load().entries  # claims chat, structured-output
    add_machine(api, "m1", 4, small("m1"), artifact("m1", smol.entry.artifact().id.hex, "smol", 1),
                artifact("m1", QUALIFIED_ID, "mistral", 4))  # fmt: skip
    KubeQualificationRecords(api).record_evidence(mistral_run())
    cli = Cli(tmp_path / "home", timeout_s=120, NODEAU_PLANE="kubernetes",
              KUBECONFIG=str(cluster.kubeconfig))  # fmt: skip

    apply(api, "chat", "qwen")  # imported, never qualified
    apply(api, "chat-anyway", "qwen", unproved=True)
    apply(api, "vectors", "mistral", task="embed")  # its embed probe failed
    apply(api, "mistral-chat", "mistral")  # proved on the fleet
    apply(api, "smol-chat", "smol")  # the catalog entry listing its bytes claims chat
    names = ("chat", "chat-anyway", "vectors", "mistral-chat", "smol-chat")
    log = tmp_path / "controller.log"
    wait_for(lambda: all(status(api, n).get("state") for n in names), "the controller decides")

    refused = {n: status(api, n).get("refusal") for n in names}
    assert refused["chat"] == {
        "kind": "qualification",
        "code": CODE,
        "message": cli_sentence(cli, "qwen", "--name", "chat-by-cli"),  # the CLI's own words
    }
    assert refused["chat"]["message"] == (
        "qwen has not proved it can chat (it was never qualified); run nodeau model qualify "
        "qwen, or pass --unproved to serve it anyway"
    )
    assert refused["vectors"] == {
        "kind": "qualification",
        "code": CODE,
        "message": cli_sentence(cli, "mistral", "--name", "v2", "--task", "embed"),
    }
    assert (
        "mistral has not proved it can embed (its embed probe failed on 2026-11-30 20:05)"
        in (refused["vectors"]["message"])
    )
    admitted = ("chat-anyway", "mistral-chat", "smol-chat")
    assert [refused[n] for n in admitted] == [None, None, None], log.read_text()
    assert all(status(api, n)["machine"] == "m1" and status(api, n)["gpuUUID"] for n in admitted)

    rows = {row["name"]: row for row in json.loads(cli("ps", "--json").stdout)}
    for name in ("chat", "vectors"):
        assert rows[name]["state"] == "refused"
        assert rows[name]["sentence"] == (
            f"refused (qualification): {CODE}: {refused[name]['message']}"
        )
        assert rows[name]["gpu"] is None
    assert {rows[n]["gpu"] for n in admitted} == {status(api, n)["gpuUUID"] for n in admitted}
    assert "chat-by-cli" not in rows and "v2" not in rows  # the CLI's refusals created nothing
    assert controller_process.poll() is None
