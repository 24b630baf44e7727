"""Every command prints one JSON shape, whichever plane serves it.

The same commands on the one-machine plane (a real llama-server) and on a fleet on a real API
server (statuses written by the test): the JSON has the same keys at every level.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.domain.workloads import WorkloadKind
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.kube_nodes import wait_for
from tests.support.real.kube_objects import decide_as_the_controller, finished, started, the_object


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


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Cli]:
    cli = Cli(tmp_path / "machine", NODEAU_PLANE="machine", NODEAU_SIMULATED_GPUS="2 x 24 GiB")
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=11)
    assert cli("models", "import", str(model), "--alias", "qwen-race").returncode == 0
    yield cli
    for row in json.loads(cli("ps", "--json").stdout or "[]"):
        cli("stop", row["name"], "--workload")


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
