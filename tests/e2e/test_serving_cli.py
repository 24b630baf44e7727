"""One machine end to end: import a tiny model, run it, call it with the openai client, stop it.

Real parts only: the installed ``nodeau`` command, a real llama-server on a
tiny GGUF model, the loopback endpoint, and the official ``openai`` client.
The cards are simulated ("1 x 24 GiB"), so the model runs on the CPU.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from gguf import GGUFValueType, Keys

from tests.support.cli import Cli as BaseCli
from tests.support.tiny_gguf import write_tiny_llama


class Cli(BaseCli):
    def __init__(self, home: Path, simulated: str = "1 x 24 GiB") -> None:
        super().__init__(home, NODEAU_SIMULATED_GPUS=simulated)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home")
    yield c
    # leave no model server or endpoint behind, whatever the test did
    done = c("ps", "--json")
    if done.returncode == 0:
        for row in json.loads(done.stdout):
            c("stop", row["name"], "--workload")


def endpoint_of(cli: Cli, name: str) -> str:
    rows = json.loads(cli("ps", "--json").stdout)
    [row] = [r for r in rows if r["name"] == name]
    endpoint: str = row["endpoint"]
    return endpoint


def test_run_serve_explain_and_stop(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0

    done = cli("run", "tiny", "--context", "512")
    assert done.returncode == 0, done.stderr
    assert "SIMULATED" in done.stdout
    assert "(estimated)" in done.stdout
    base = endpoint_of(cli, "tiny")

    client = openai.OpenAI(base_url=base, api_key="unused", timeout=60)
    assert [m.id for m in client.models.list()] == ["tiny"]
    answer = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=8
    )
    assert answer.choices[0].message.content is not None
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=8,
            stream=True,
        )
    )
    assert len(chunks) >= 2

    ps = cli("ps")
    assert "tiny" in ps.stdout and "serving" in ps.stdout and "(simulated)" in ps.stdout
    explain = cli("service", "explain", "tiny")
    assert explain.returncode == 0, explain.stderr
    for term in ("weights", "kv cache", "compute buffer", "margin", "estimated", "SIMULATED"):
        assert term in explain.stdout
    placement = cli("placement", "explain", "tiny")
    assert "why: pack" in placement.stdout

    # stopping the endpoint leaves the model loaded; running again only brings the endpoint back
    assert cli("stop", "tiny").returncode == 0
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=base, api_key="unused", timeout=5, max_retries=0).models.list()
    again = cli("run", "tiny")
    assert again.returncode == 0, again.stderr
    assert "already serving" in again.stdout
    assert endpoint_of(cli, "tiny") == base  # the same address across restarts
    assert [m.id for m in client.models.list()] == ["tiny"]

    stopped = cli("stop", "tiny", "--workload")
    assert stopped.returncode == 0, stopped.stderr
    assert "is free" in stopped.stdout
    assert json.loads(cli("ps", "--json").stdout) == []


def test_a_refusal_says_its_kind_and_creates_nothing(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", simulated="1 x 1 GiB")
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=4)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    # 128k tokens of context: the attention scratch alone is over a GiB (estimated)
    done = cli("run", "tiny", "--context", "131072")
    assert done.returncode == 2
    assert done.stderr.startswith("refused (capacity): capacity.no-card-large-enough: ")
    assert json.loads(cli("ps", "--json").stdout) == []


def test_environment_and_fleet_say_simulated(cli: Cli) -> None:
    env = cli("environment")
    assert env.returncode == 0
    assert "SIMULATED" in env.stdout and "Simulated GPU (24 GiB)" in env.stdout
    fleet = cli("fleet", "list")
    assert "testbox" in fleet.stdout and "one machine" in fleet.stdout


def test_an_embed_workload_answers_embeddings_and_only_them(cli: Cli, tmp_path: Path) -> None:
    # the model declares its pooling (mean), as converted embedding models do
    pooling = {Keys.LLM.POOLING_TYPE.format(arch="llama"): (1, GGUFValueType.UINT32)}
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=5, override_keys=pooling)
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    done = cli("run", "tiny", "--name", "vectors", "--task", "embed", "--context", "256")
    assert done.returncode == 0, done.stderr
    client = openai.OpenAI(base_url=endpoint_of(cli, "vectors"), api_key="unused", timeout=60)
    result = client.embeddings.create(model="vectors", input=["hello there", "general kenobi"])
    assert len(result.data) == 2
    assert len(result.data[0].embedding) == 64  # the tiny model's embedding width
    assert result.data[0].embedding != result.data[1].embedding
    # the routes are the task's: a chat call to an embed workload is a clear 404
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="vectors", messages=[{"role": "user", "content": "x"}])
    assert "embed" in str(refused.value)
