"""Real serving across a recovery: one loopback address, the openai client, two real llama-servers.

The servers stand for two machines' model-server Pods (127.0.0.2 and 127.0.0.3). The workload's
endpoint is called before, while its machine is fenced, and after it moved; each server's log
counts what it served.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube import server_keys
from nodeau.adapters.kube.health_store import read_health
from nodeau.adapters.kube.report_form import MachineArtifact
from nodeau.adapters.llama_server import find_llama_server
from nodeau.domain.health import Health
from nodeau.domain.memory import GIB
from tests.support.builders.summaries import SUMMARY
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import status
from tests.support.real.kube_lossy import lossy_machines
from tests.support.real.kube_nodes import kwok_node
from tests.support.real.kube_recovery import SHAS, Fleet, record
from tests.support.real.kubelet import ended

# The test models are stand-ins (a made-up or random-weight GGUF) that prove nothing: serving
# them is the user's explicit choice (docs/adr/0010).
UNPROVED = ("--unproved",)

SERVED = "processing task"  # what llama-server logs for each request it works on
OLD, NEW = "127.0.0.2", "127.0.0.3"


def llama_server() -> Path:
    found = find_llama_server(os.environ)
    if found is None or not found.is_file():  # a failure under CI=true and elsewhere alike
        pytest.fail("no llama-server: run `nodeau server install --cpu` or set NODEAU_LLAMA_SERVER")
    return found


@contextmanager
def model_server(binary: Path, model: Path, host: str, log: Path, key: str) -> Iterator[None]:
    """A real llama-server on ``host``:8080 (the port every model-server Pod listens on),
    with the key its Pod's container would read from the workload's Secret."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary), "-m", str(model), "--host", host, "--port", str(r.SERVER_PORT),
             "-c", "256", "-np", "1"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, server_keys.SERVER_VARIABLE: key},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while b"listening on" not in log.read_bytes():
            assert process.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, f"llama-server on {host} not ready"
            time.sleep(0.1)
        yield
    finally:
        ended(process)


def key_of(api: Any) -> str | None:
    return server_keys.read_key(api, "service", "auto")


def served(log: Path) -> int:
    return log.read_text(errors="replace").count(SERVED)


def tiny(machine: str, path: Path) -> MachineArtifact:
    return MachineArtifact(
        id=SHAS["x"] * 32, names=("xmodel",), size_bytes=4 * GIB, path=str(path), summary=SUMMARY
    )


def give_address(api: Any, fleet: Fleet, node: str, address: str) -> None:
    """Once KWOK runs the workload's Pod on ``node``, its address is the stand-in's."""
    core = client.CoreV1Api(api)

    def running() -> bool:
        try:
            pod = core.read_namespaced_pod("service-auto", r.NAMESPACE)
        except client.ApiException:
            return False
        return pod.spec.node_name == node and pod.status.phase == "Running"

    deadline = time.monotonic() + 60
    while not running():
        assert time.monotonic() < deadline, f"service-auto not running on {node}"
        time.sleep(0.2)
    core.patch_namespaced_pod_status(
        "service-auto",
        r.NAMESPACE,
        [
            {"op": "replace", "path": "/status/podIP", "value": address},
            {"op": "replace", "path": "/status/podIPs", "value": [{"ip": address}]},
        ],
    )
    fleet.until(
        lambda: status(api, "auto").get("endpoint") == f"http://{address}:8080/v1",
        f"auto serving at {address}",
        60,
    )


def ask(chat: openai.OpenAI) -> str:
    answer = chat.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    return answer.choices[0].finish_reason or ""


def test_one_loopback_address_answers_before_and_after_a_recovery(
    fresh_fleet: Any, cluster: Cluster, tmp_path: Path
) -> None:
    api = fresh_fleet
    binary = llama_server()
    model = tmp_path / "tiny.gguf"
    write_tiny_llama(model)
    fleet = Fleet(api)
    nodeau = Cli(
        tmp_path / "home", timeout_s=120, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )  # fmt: skip
    old_log, new_log = tmp_path / "old.log", tmp_path / "new.log"
    with lossy_machines(cluster, api, "l1") as lossy, ExitStack() as stack:
        fleet.machine("l1", 1, tiny("l1", model))
        running = nodeau.start(
            "run", "xmodel", "--name", "auto", "--recovery", "automatic", "--after", "5s",
            "--wait", "60", "--json", *UNPROVED,
        )  # fmt: skip
        while running.poll() is None:
            fleet.step()
            time.sleep(0.3)
        out, err = running.communicate()
        assert running.returncode == 0, err
        endpoint = json.loads(out)["workload"]["endpoint"]
        assert endpoint.startswith("http://127.0.0.1:")
        fleet.until(lambda: key_of(api) is not None, "auto's key", 60)
        key = key_of(api)
        assert key is not None
        pod = client.CoreV1Api(api).read_namespaced_pod("service-auto", r.NAMESPACE)
        [env] = [e for e in pod.spec.containers[0].env if e.name == "LLAMA_API_KEY"]
        assert env.value is None and env.value_from.secret_key_ref.name == "service-auto-key"
        stack.enter_context(model_server(binary, model, OLD, old_log, key))
        give_address(api, fleet, "l1", OLD)
        refused = httpx.post(f"http://{OLD}:{r.SERVER_PORT}/v1/chat/completions", json={})
        assert refused.status_code == 401, "the Pod's server answers only with its key"

        chat = openai.OpenAI(base_url=endpoint, api_key="unused", max_retries=0, timeout=60)
        assert ask(chat) == "length"  # the endpoint sends the key
        assert served(old_log) == 1

        # where it could go; then l1 goes off the network (its model server still runs)
        client.CoreV1Api(api).create_node(kwok_node("c"))
        fleet.machine("c", 1, tiny("c", model))
        lossy["l1"].off()
        fleet.quiet.add("l1")
        fleet.until(lambda: read_health(api)["l1"].state is Health.UNREACHABLE, "fenced", 90)
        fenced_at = served(old_log)
        with pytest.raises(openai.APIStatusError) as refused:
            ask(chat)  # answered at once by the endpoint, never sent to l1
        assert refused.value.status_code == 503
        assert "no model server to route to now" in str(refused.value.body)

        with model_server(binary, model, NEW, new_log, key):
            fleet.until(lambda: record(api, "auto").workload.machine == "c", "auto moved", 60)
            give_address(api, fleet, "c", NEW)
            assert ask(chat) == "length"  # the same address, answered from c
            assert served(new_log) == 1  # one request: the refused one was not replayed
        assert served(old_log) == fenced_at == 1  # nothing reached l1's server once fenced
        done = nodeau("stop", "auto", "--workload")
        assert done.returncode == 0, done.stderr
