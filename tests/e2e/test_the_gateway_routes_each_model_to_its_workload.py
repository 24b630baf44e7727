"""``nodeau gateway``: one address for every model served here, routed by ``model``.

Two workloads (real llama-server, simulated cards) through the ``openai`` client: listed,
answered by name or alias, ``gpt-4o`` a 404 ``model_not_found``, a stopped endpoint unrouted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.upstream import free_port

pytestmark = pytest.mark.slow
ASK = [{"role": "user", "content": "hi"}]


def listed_soon(client: openai.OpenAI, expected: list[str], bound_s: float = 10.0) -> bool:
    """Whether the gateway lists ``expected`` within ``bound_s`` (it reads the state
    afresh every second)."""
    deadline = time.monotonic() + bound_s
    while sorted(m.id for m in client.models.list()) != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_the_gateway_serves_every_model_here_by_its_names(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="2 x 24 GiB")
    for seed, alias in ((6, "tiny-a"), (7, "tiny-b")):
        model = write_tiny_llama(tmp_path / f"{alias}.gguf", seed=seed)
        assert cli("models", "import", str(model), "--alias", alias).returncode == 0
    for alias, name in (("tiny-a", "alpha"), ("tiny-b", "beta")):
        started = cli("run", alias, "--name", name, "--unproved", "--context", "256")
        assert started.returncode == 0, started.stderr
    port = free_port()
    try:
        opened = cli("gateway", "--port", str(port), "--json")
        assert opened.returncode == 0, opened.stderr
        gateway = json.loads(opened.stdout)
        assert (gateway["url"], gateway["started"]) == (f"http://127.0.0.1:{port}/v1", True)
        again = json.loads(cli("gateway", "--json").stdout)
        assert (again["port"], again["started"]) == (port, False), "the port is kept"

        client = openai.OpenAI(base_url=gateway["url"], api_key="anything", max_retries=0)
        assert sorted(m.id for m in client.models.list()) == ["alpha", "beta"]
        for asked, served in (("alpha", "alpha"), ("tiny-a", "alpha"), ("tiny-b", "beta")):
            assert client.models.retrieve(asked).id == served
            reply = client.chat.completions.create(model=asked, messages=ASK, max_tokens=2)
            assert reply.choices[0].message.content is not None, asked
        with pytest.raises(openai.NotFoundError) as refused:
            client.chat.completions.create(model="gpt-4o", messages=ASK)
        assert refused.value.code == "model_not_found"
        assert "nodeau run gpt-4o serves it" in str(refused.value)
        assert "'alpha', 'beta'" in str(refused.value)
        no_model = httpx.post(f"{gateway['url']}/chat/completions", json={"messages": ASK})
        assert no_model.status_code == 400, "the gateway guesses no model"

        assert cli("stop", "alpha").returncode == 0  # its endpoint only: the model stays
        assert listed_soon(client, ["beta"]), "the gateway looks again within a second"
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="alpha", messages=ASK)
    finally:
        stopped = cli("gateway", "--stop")
        for name in ("alpha", "beta"):
            cli("stop", name, "--workload")
    assert stopped.stdout.strip() == "the gateway was stopped"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
