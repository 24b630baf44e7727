"""``nodeau gateway`` on a fleet: one loopback address for every GPUService, routed by ``model``.

Two minimal model servers stand for the Pods; with the ``openai`` client: a stopped endpoint
leaves, a moved service is followed, a held one is 503 with Retry-After, a deleted one a 404.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import create
from tests.support.real.upstream import MinimalUpstream, running_upstream

BOUND_S = 20.0
HELLO = [{"role": "user", "content": "hi"}]


def routed(api: client.ApiClient, name: str, status: dict[str, Any]) -> None:
    """Write the route the controller writes for ``name``."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, name, {"status": status}
    )


def eventually(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


@pytest.fixture
def upstreams() -> Iterator[tuple[str, MinimalUpstream, str, MinimalUpstream]]:
    one, two = MinimalUpstream(model="alpha"), MinimalUpstream(model="beta")
    with running_upstream(one) as first, running_upstream(two) as second:
        yield first, one, second, two


@pytest.fixture
def gateway(
    cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path
) -> Iterator[tuple[Cli, str]]:
    cli = Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )
    with socket.socket() as sock:  # a port of its own: tests run side by side
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    opened = cli.json("gateway", "--port", str(port))
    assert isinstance(opened, dict)
    address = str(opened["url"])
    try:
        yield cli, address
    finally:
        cli("gateway", "--stop")


def models(address: str) -> list[str]:
    listed = httpx.get(f"{address}/models", timeout=BOUND_S, trust_env=False).json()
    return sorted(m["id"] for m in listed["data"])


def test_each_request_goes_to_the_service_its_model_names_wherever_it_moves(
    fresh_fleet: client.ApiClient,
    upstreams: tuple[str, MinimalUpstream, str, MinimalUpstream],
    gateway: tuple[Cli, str],
) -> None:
    first, one, second, two = upstreams
    _cli, address = gateway
    create(fresh_fleet, "alpha", "qwen-a")
    create(fresh_fleet, "beta", "qwen-b")
    create(fresh_fleet, "gamma", "qwen-c")
    routed(fresh_fleet, "alpha", {"state": "serving", "endpoint": f"{first}/v1"})
    routed(fresh_fleet, "beta", {"state": "serving", "endpoint": f"{second}/v1"})
    routed(fresh_fleet, "gamma", {"state": "held", "endpoint": ""})
    eventually("alpha and beta listed", lambda: models(address) == ["alpha", "beta"])

    c = openai.OpenAI(base_url=address, api_key="unused", max_retries=0, timeout=BOUND_S)
    c.chat.completions.create(model="alpha", messages=HELLO)  # type: ignore[arg-type]
    c.chat.completions.create(model="qwen-b", messages=HELLO)  # type: ignore[arg-type]
    assert (len(one.seen), len(two.seen)) == (1, 1)

    with pytest.raises(openai.APIStatusError) as held:
        c.chat.completions.create(model="gamma", messages=HELLO)  # type: ignore[arg-type]
    assert held.value.status_code == 503 and held.value.response.headers["retry-after"]

    # alpha recovers onto the other server: the gateway follows its route
    routed(fresh_fleet, "alpha", {"endpoint": f"{second}/v1"})

    def moved() -> bool:
        c.chat.completions.create(model="alpha", messages=HELLO)  # type: ignore[arg-type]
        return len(two.seen) > 1

    eventually("alpha's requests reach where it serves now", moved)

    # nodeau stop beta (its endpoint stopped) takes it off the gateway; deleted, alpha is gone
    client.CustomObjectsApi(fresh_fleet).patch_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "beta", {"spec": {"endpoint": "stopped"}}
    )
    client.CustomObjectsApi(fresh_fleet).delete_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "alpha"
    )
    eventually("beta stopped and alpha deleted leave the list", lambda: models(address) == [])
    with pytest.raises(openai.NotFoundError) as gone:
        c.chat.completions.create(model="alpha", messages=HELLO)  # type: ignore[arg-type]
    assert gone.value.code == "model_not_found" and "nodeau run" in str(gone.value)


def test_the_gateway_on_a_fleet_says_so_and_stops(gateway: tuple[Cli, str]) -> None:
    cli, address = gateway
    again = cli("gateway")
    assert again.returncode == 0, again.stderr
    assert f"gateway already running at {address}" in again.stdout
    assert "every model served on the fleet answers there" in again.stdout
    health = httpx.get(address.removesuffix("/v1") + "/health", timeout=BOUND_S, trust_env=False)
    assert health.status_code == 200
    assert cli("gateway", "--stop").stdout.strip() == "the gateway was stopped"
