"""Batch jobs on the fleet run and finish, through the real CLI and the real controller process.

Each request answered and kept in the cluster, the job succeeded, its Pod gone and card free; a
stop keeps the results so far; a restarted worker resends nothing answered. KWOK runs no
containers, so each batch Pod's containers (real llama-server, real worker) run here.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.batch_results import KubeFleetBatches, piece_name
from nodeau.adapters.kube.report_form import MachineArtifact
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.kube_apply import (
    ISSUER,
    MANIFESTS,
    apply_manifests,
    kubeconfig_for_token,
    service_account_token,
)
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, gpu_uuid
from tests.support.real.kube_nodes import wait_for
from tests.support.real.kubelet import ended, running_pods
from tests.support.real.llama import llama_server_binary
from tests.support.real.real_models import sha256_of

WORKER = "nodeau-batch-worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def container_env(api: Any, container: Any) -> dict[str, str]:
    """A container's environment as its kubelet gives it: values, and Secrets' keys."""
    env: dict[str, str] = {}
    for e in container.env or ():
        if e.value_from is not None:
            ref = e.value_from.secret_key_ref
            secret = client.CoreV1Api(api).read_namespaced_secret(ref.name, r.NAMESPACE)
            env[e.name] = base64.b64decode(secret.data[ref.key]).decode()
        else:
            env[e.name] = e.value or ""
    return env


class Containers:
    """One batch Pod's containers, run here: the model server and the worker."""

    def __init__(self, api: Any, pod: Any, binary: Path, logs: Path, kubeconfig: Path) -> None:
        server, worker = pod.spec.containers
        assert (server.name, worker.name) == ("server", "worker")
        self.name = pod.metadata.name
        self.port = free_port()
        args = list(server.args)
        args[args.index("--host") + 1] = "127.0.0.1"
        args[args.index("--port") + 1] = str(self.port)
        self.logs = logs
        with (logs / f"{self.name}-server.log").open("wb") as log:
            self.server = subprocess.Popen(
                [str(binary), *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env={**os.environ, **container_env(api, server)},
            )  # fmt: skip
        wargs = list(worker.args)
        at = wargs.index("--server") + 1
        assert wargs[at] == f"http://127.0.0.1:{r.SERVER_PORT}"  # the Pod's own loopback
        wargs[at] = f"http://127.0.0.1:{self.port}"
        command = list(worker.command)
        assert command[:1] == ["python"]
        self.worker_argv = [sys.executable, *command[1:], *wargs]
        self.env = {**os.environ, **container_env(api, worker), "KUBECONFIG": str(kubeconfig)}
        self.worker_starts = 0
        self.worker = self.start_worker()

    def start_worker(self) -> subprocess.Popen[bytes]:
        self.worker_starts += 1
        with (self.logs / f"{self.name}-worker-{self.worker_starts}.log").open("wb") as log:
            return subprocess.Popen(
                self.worker_argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self.env,
            )  # fmt: skip

    def tend(self) -> None:
        """The kubelet's ``OnFailure``: a worker that failed is started again."""
        code = self.worker.poll()
        if code is not None and code != 0:
            self.worker = self.start_worker()

    def end(self) -> None:
        for process in (self.worker, self.server):
            ended(process)


@contextmanager
def kubelet_stand_in(
    api: Any, binary: Path, logs: Path, kubeconfig: Path
) -> Iterator[dict[str, Containers]]:
    """Runs the containers of every batch Pod KWOK has running, until the Pod goes."""
    core = client.CoreV1Api(api)

    def pods() -> list[Any]:
        listed = core.list_namespaced_pod(r.NAMESPACE).items
        return [p for p in listed if p.metadata.name.startswith("batch-")]

    def start(pod: Any) -> Containers:
        return Containers(api, pod, binary, logs, kubeconfig)

    with running_pods(pods, start, Containers.end, Containers.tend, every_s=0.1) as running:
        yield running


@pytest.fixture
def fleet(
    cluster: Cluster, fresh_fleet: client.ApiClient, controller: None, tmp_path: Path
) -> Iterator[tuple[Cli, dict[str, Containers]]]:
    """A machine with one (simulated) card holding a tiny model, deploy/ applied, the real
    controller running, the Pods' containers stood in for; the CLI on the fleet plane."""
    api = fresh_fleet
    apply_manifests(api, MANIFESTS)
    token = service_account_token(api, r.NAMESPACE, WORKER, ISSUER)
    worker_config = kubeconfig_for_token(cluster, token, tmp_path / "worker.kubeconfig")
    (tmp_path / "models").mkdir()
    model = write_tiny_llama(tmp_path / "models" / "tiny.gguf", seed=5, quant="q8_0")
    artifact = MachineArtifact(
        id=sha256_of(model),
        names=("tiny",),
        size_bytes=model.stat().st_size,
        path=str(model),
        summary=GgufModelInspector().inspect(model),
    )
    add_machine(api, "m1", 1, artifact)
    cli = Cli(
        tmp_path / "home", timeout_s=120, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )  # fmt: skip
    with kubelet_stand_in(api, llama_server_binary(), tmp_path, worker_config) as running:
        yield cli, running


def request(custom_id: str, tokens: int = 4) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "tiny",
            "messages": [{"role": "user", "content": f"hello {custom_id}"}],
            "max_tokens": tokens,
            "ignore_eos": True,
        },
    }


def submit(
    cli: Cli, tmp_path: Path, name: str, lines: list[str]
) -> subprocess.CompletedProcess[str]:
    file = tmp_path / f"{name}.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return cli("batch", "submit", str(file), "--model", "tiny", "--unproved", "--name", name)


def status(cli: Cli, name: str) -> dict[str, Any]:
    done = cli("batch", "status", name, "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def results(cli: Cli, name: str) -> list[dict[str, Any]]:
    done = cli("batch", "results", name)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def card_holder(cli: Cli) -> str | None:
    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict)
    [machine] = listing["machines"]
    [gpu] = machine["gpus"]
    assert gpu["uuid"] == gpu_uuid("m1", 0)
    holder: str | None = gpu["held_by"]
    return holder


def pod_gone(api: Any, name: str) -> bool:
    try:
        client.CoreV1Api(api).read_namespaced_pod(f"batch-{name}", r.NAMESPACE)
    except client.ApiException as exc:
        assert exc.status == 404
        return True
    return False


def kept(api: Any, name: str) -> list[dict[str, Any]]:
    """The results kept in the cluster now, read as the admin."""
    return list(KubeFleetBatches(api).lines(name))


def test_a_batch_job_on_the_fleet_answers_every_request_and_frees_its_card(
    fleet: tuple[Cli, dict[str, Containers]], fresh_fleet: Any, tmp_path: Path
) -> None:
    cli, _ = fleet
    lines = [json.dumps(request(f"r{i}")) for i in range(1, 5)]
    lines.insert(2, '{"custom_id": "bad", "method": "GET"}')
    done = submit(cli, tmp_path, "job1", lines)
    assert done.returncode == 0, done.stderr
    assert "line 3: method must be POST" in done.stderr
    assert "job1: admitted on m1" in done.stdout
    assert done.stdout.splitlines()[0].endswith(" (estimated)")  # as on one machine
    assert "running 4 requests (1 bad lines skipped)" in done.stdout

    wait_for(lambda: status(cli, "job1")["state"] == "succeeded", "job1 succeeded", 180)
    st = status(cli, "job1")
    assert (st["total"], st["done"], st["failed"], st["left"], st["bad_lines"]) == (4, 4, 0, 0, 1)
    assert st["sentence"].startswith("succeeded on m1")
    assert st["results"] == "ConfigMaps -n nodeau-system -l nodeau.ai/batch-results=job1"
    wait_for(lambda: pod_gone(fresh_fleet, "job1"), "the Pod gone")
    assert card_holder(cli) is None  # the reservation is released
    table = cli("batch", "status").stdout
    assert "job1" in table and "succeeded" in table
    assert cli.json("ps") == []  # as on one machine: a finished job is batch status's only

    out = results(cli, "job1")
    assert sorted(o["custom_id"] for o in out) == ["r1", "r2", "r3", "r4"]
    for o in out:  # the OpenAI batch output format, as on one machine
        assert set(o) == {"id", "custom_id", "response", "error"}
        assert o["error"] is None
        assert o["response"]["status_code"] == 200
        assert o["response"]["body"]["choices"][0]["message"]["content"] is not None
    # kept in the cluster, owned by the BatchJob (deleting the job deletes them)
    piece = client.CoreV1Api(fresh_fleet).read_namespaced_config_map(
        piece_name("job1", 0), r.NAMESPACE
    )
    [owner] = piece.metadata.owner_references
    assert (owner.kind, owner.name) == (r.BATCHJOB_KIND, "job1")
    job = client.CustomObjectsApi(fresh_fleet).get_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.BATCHJOBS, "job1"
    )
    assert owner.uid == job["metadata"]["uid"]
    assert (job["status"]["completed"], job["status"]["failed"]) == (4, 0)


def test_stopping_a_batch_job_on_the_fleet_frees_its_card_and_keeps_its_results(
    fleet: tuple[Cli, dict[str, Containers]], fresh_fleet: Any, tmp_path: Path
) -> None:
    cli, _ = fleet
    lines = [json.dumps(request(f"s{i}", tokens=150)) for i in range(1, 201)]
    assert submit(cli, tmp_path, "long", lines).returncode == 0
    wait_for(lambda: len(kept(fresh_fleet, "long")) >= 2, "two results kept", 180)

    stopped = cli("batch", "stop", "long")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("long: stopped; ")
    assert stopped.stdout.rstrip().endswith("its card is free")
    assert pod_gone(fresh_fleet, "long")
    assert card_holder(cli) is None
    st = status(cli, "long")
    assert st["state"] == "stopped" and st["sentence"].startswith("stopped")
    assert st["done"] >= 2 and st["left"] > 0

    said = int(stopped.stdout.removeprefix("long: stopped; ").split(" ", 1)[0])
    assert said >= 2 and f"{said} results kept (ConfigMaps -n nodeau-system" in stopped.stdout
    out = results(cli, "long")
    ids = [o["custom_id"] for o in out]
    assert len(ids) == len(set(ids)) == st["done"] + st["failed"] >= said
    assert all(o["response"]["status_code"] == 200 for o in out)


def test_a_worker_that_restarts_sends_nothing_that_has_a_result(
    fleet: tuple[Cli, dict[str, Containers]], fresh_fleet: Any, tmp_path: Path
) -> None:
    cli, running = fleet
    total = 12
    lines = [json.dumps(request(f"w{i}", tokens=64)) for i in range(1, total + 1)]
    assert submit(cli, tmp_path, "again", lines).returncode == 0
    wait_for(lambda: len(kept(fresh_fleet, "again")) >= 1, "a first result kept", 180)
    [containers] = running.values()
    os.kill(containers.server.pid, signal.SIGSTOP)  # what it is answering now, it holds
    containers.worker.send_signal(signal.SIGKILL)  # the worker's container fails
    containers.worker.wait(timeout=30)
    before = kept(fresh_fleet, "again")
    assert 1 <= len(before) < total
    os.kill(containers.server.pid, signal.SIGCONT)  # the kubelet starts the worker again

    wait_for(lambda: status(cli, "again")["state"] == "succeeded", "again succeeded", 180)
    assert containers.worker_starts == 2
    after = results(cli, "again")
    assert after[: len(before)] == before  # what was kept stays as it was
    ids = [o["custom_id"] for o in after]
    assert sorted(ids) == sorted(f"w{i}" for i in range(1, total + 1))  # each exactly once
    answered = {o["custom_id"] for o in before}
    assert not answered & {o["custom_id"] for o in after[len(before) :]}
    assert card_holder(cli) is None


def test_the_batch_worker_writes_only_results(
    cluster: Cluster, fresh_fleet: Any, tmp_path: Path
) -> None:
    """deploy/'s RBAC and admission policy: the worker's ServiceAccount reads a BatchJob and
    writes results ConfigMaps, and nothing else (the ledger is out of its reach); the
    controller reads them by name."""
    api = fresh_fleet
    apply_manifests(api, MANIFESTS)
    token = service_account_token(api, r.NAMESPACE, WORKER, ISSUER)
    ns = f"/api/v1/namespaces/{r.NAMESPACE}"

    def cm(name: str, **labels: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}

    with httpx.Client(
        base_url=cluster.server, headers={"Authorization": f"Bearer {token}"},
        verify=ssl.create_default_context(cafile=str(cluster.ca_file)), timeout=10.0,
    ) as http:  # fmt: skip
        made = http.post(
            f"{ns}/configmaps", json=cm("batch-results-j-0", **{"nodeau.ai/batch-results": "j"})
        )
        assert made.status_code == 201, made.text
        # an admission policy is in force a moment after it is applied: until then the
        # health record's create goes through (201), then exists (409), then is refused (403)
        wait_for(
            lambda: http.post(f"{ns}/configmaps", json=cm(r.HEALTH_CONFIGMAP)).status_code == 403,
            "policy nodeau-batch-worker in force",
        )
        health = http.post(f"{ns}/configmaps", json=cm(r.HEALTH_CONFIGMAP))
        assert health.status_code == 403, health.text
        assert "a batch worker writes only batch results ConfigMaps" in health.text
        other = http.post(
            f"{ns}/configmaps", json=cm("batch-results-j-1", **{"nodeau.ai/batch-results": "k"})
        )
        assert other.status_code == 403, other.text  # not the job its label names
        assert http.get(f"{ns}/configmaps").status_code == 403  # no list
        assert http.delete(f"{ns}/configmaps/batch-results-j-0").status_code == 403
        assert http.get(f"{ns}/pods").status_code == 403
        assert http.get(f"{ns}/secrets").status_code == 403
        crs = f"/apis/{r.API_VERSION}/namespaces/{r.NAMESPACE}"
        assert http.get(f"{crs}/batchjobs/nope").status_code == 404  # get allowed: not there
        assert http.get(f"{crs}/batchjobs").status_code == 403  # no list
        assert http.get(f"{crs}/gpuservices/nope").status_code == 403
    controller = service_account_token(api, r.NAMESPACE, "nodeau-controller", ISSUER)
    with httpx.Client(
        base_url=cluster.server, headers={"Authorization": f"Bearer {controller}"},
        verify=ssl.create_default_context(cafile=str(cluster.ca_file)), timeout=10.0,
    ) as http:  # fmt: skip
        read = http.get(f"{ns}/configmaps/batch-results-j-0")  # the controller counts them
        assert read.status_code == 200 and read.json()["data"] == {"k": "v"}
        assert http.get(f"{ns}/configmaps").status_code == 403  # still no list
