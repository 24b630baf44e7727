"""Every command prints one JSON shape, whichever plane serves it.

The same commands run on the one-machine plane (a real llama-server serving a tiny
model on simulated cards) and on a fleet on a real API server, where the test writes
each object's status as the controller does (the CLI is what is compared here). The
JSON documents must have the same keys at every level.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve
from kubernetes import client
from returns.result import Success

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.reports import publish_report
from nodeau.adapters.record_json import pack, to_plain
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.cluster import MachineReport
from nodeau.ports.state import Admission, Snapshot, WorkloadRecord
from tests.support.admissions import decider, fleet_of
from tests.support.cli import Cli
from tests.support.kube_cluster import Cluster
from tests.support.kube_nodes import create_kwok_nodes, wait_for
from tests.support.tiny_gguf import write_tiny_llama

NOW = datetime.now(UTC).replace(microsecond=123456)
PLURAL = {WorkloadKind.SERVICE: r.GPUSERVICES, WorkloadKind.BATCH: r.BATCHJOBS}


def shape(value: Any) -> Any:
    """The keys of a JSON document at every level (a list's shape is its first item's)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None


def keys_of(value: Any) -> set[str]:
    """Every key path of a JSON document, for a readable failure."""
    out: set[str] = set()

    def walk(v: Any, at: str) -> None:
        if isinstance(v, dict):
            for k, item in v.items():
                out.add(f"{at}.{k}")
                walk(item, f"{at}.{k}")
        elif isinstance(v, list) and v:
            walk(v[0], f"{at}[]")

    walk(value, "")
    return out


def same_keys(one: Any, other: Any) -> None:
    assert keys_of(one) == keys_of(other), (
        f"only on one machine: {sorted(keys_of(one) - keys_of(other))}; "
        f"only on the fleet: {sorted(keys_of(other) - keys_of(one))}"
    )
    assert shape(one) == shape(other)


def the_object(api: client.ApiClient, kind: WorkloadKind, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, PLURAL[kind], name
        )
    except client.ApiException as exc:
        assert exc.status == 404
        return None
    return found


def decide_as_the_controller(api: client.ApiClient, kind: WorkloadKind, name: str) -> None:
    """Write the admitted status the controller writes (status subresource, replaced whole)."""
    outcome = decider(name, fleet_of(2), NOW)(Snapshot(ledger=Ledger(), workloads=()))
    assert isinstance(outcome, Success)
    admission: Admission = outcome.unwrap()
    if kind is WorkloadKind.BATCH:
        workload = evolve(admission.record.workload, kind=WorkloadKind.BATCH)
        admission = evolve(admission, record=evolve(admission.record, workload=workload))
    record = admission.record
    status = {
        "state": "admitted",
        "sentence": "admitted",
        "machine": record.workload.machine,
        "gpuUUID": record.workload.gpu_uuid,
        "reservedBytes": admission.placement.reservation.bytes,
        "source": "estimated",
        "decidedBy": "test",
        "record": to_plain(record, WorkloadRecord),
        "admission": pack(admission, Admission),
        "reservation": to_plain(admission.placement.reservation, Reservation),
        "conditions": [
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "fits",
                "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ],
    }
    if kind is WorkloadKind.SERVICE:
        status["endpoint"] = "http://10.1.2.3:8080/v1"
    custom = client.CustomObjectsApi(api)
    body = custom.get_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, PLURAL[kind], name)
    body["status"] = status
    custom.replace_namespaced_custom_object_status(
        r.GROUP, r.VERSION, r.NAMESPACE, PLURAL[kind], name, body
    )


def started(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return cli.start(*args)


def finished(running: subprocess.Popen[str]) -> Any:
    out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    return json.loads(out)


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Cli]:
    cli = Cli(tmp_path / "machine", NODEAU_PLANE="machine", NODEAU_SIMULATED_GPUS="2 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=11)
    assert cli("models", "import", str(model), "--alias", "qwen-race").returncode == 0
    yield cli
    for row in json.loads(cli("ps", "--json").stdout or "[]"):
        cli("stop", row["name"], "--workload")


@pytest.fixture
def fleet(cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path) -> Cli:
    create_kwok_nodes(fresh_fleet, ["m1"])
    reading = SimulatedGpuInventory("m1", "2 x 24 GiB").read()
    publish_report(fresh_fleet, MachineReport(reading=reading, at=NOW))
    return Cli(
        tmp_path / "fleet",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )


def test_every_command_prints_one_json_shape_on_both_planes(
    machine: Cli, fleet: Cli, fresh_fleet: client.ApiClient, tmp_path: Path
) -> None:
    api = fresh_fleet

    # run
    unproved = ("--unproved",)  # the imported test model has random weights: it proves nothing
    here = finished(started(machine, "run", "qwen-race", "--name", "chat-1", *unproved, "--json"))
    running = started(fleet, "run", "qwen-race", "--name", "chat-1", *unproved, "--json")
    wait_for(lambda: the_object(api, WorkloadKind.SERVICE, "chat-1") is not None, "a GPUService")
    decide_as_the_controller(api, WorkloadKind.SERVICE, "chat-1")
    there = finished(running)
    same_keys(here, there)
    assert here["workload"]["endpoint"].startswith("http://127.0.0.1:")
    assert there["workload"]["endpoint"].startswith("http://127.0.0.1:")  # its loopback endpoint
    assert there["workload"]["endpoint"] != here["workload"]["endpoint"]

    # batch submit, status
    file = tmp_path / "job.jsonl"
    line = {
        "custom_id": "q1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    }
    file.write_text(json.dumps(line) + "\n", encoding="utf-8")
    submit = (
        "batch", "submit", str(file), "--model", "qwen-race", "--unproved", "--name", "job",
        "--json",
    )  # fmt: skip
    here = finished(started(machine, *submit))
    running = started(fleet, *submit)
    wait_for(lambda: the_object(api, WorkloadKind.BATCH, "job") is not None, "a BatchJob")
    decide_as_the_controller(api, WorkloadKind.BATCH, "job")
    there = finished(running)
    same_keys(here, there)
    same_keys(machine.json("batch", "status"), fleet.json("batch", "status"))
    same_keys(machine.json("batch", "status", "job"), fleet.json("batch", "status", "job"))

    # ps, fleet list, the explains
    here_ps, there_ps = machine.json("ps"), fleet.json("ps")
    assert isinstance(here_ps, list) and isinstance(there_ps, list)
    # (the machine's one-request job may have finished and freed its card already)
    assert "chat-1" in {r["name"] for r in here_ps} & {r["name"] for r in there_ps}
    same_keys(here_ps, there_ps)
    same_keys(machine.json("fleet", "list"), fleet.json("fleet", "list"))
    for command in (("service", "explain", "chat-1"), ("placement", "explain", "chat-1")):
        same_keys(machine.json(*command), fleet.json(*command))
