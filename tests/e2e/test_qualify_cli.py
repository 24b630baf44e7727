"""``nodeau model qualify`` end to end on real models: what each proves, what it may then run.

Real llama-server, SmolLM2-135M-Instruct, all-MiniLM-L6-v2 and the random tiny llama (fails
every probe); outcomes are those observed (docs/probes.md), probes from a fixed seed.
Cards are simulated: reported buffers are evidence, never a card's measurement.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import psutil
import pytest

from nodeau.adapters.catalog_file import JsonCatalogFile, catalog_json
from nodeau.apps.cli.bootstrap import shipped_catalog
from nodeau.domain.catalog import Catalog
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli as BaseCli
from tests.support.real.real_models import SMOLLM2, fetch, fetch_minilm

SEED = "0"
CONTEXT = "1024"
BUFFERS = "runtime's reported buffers (simulated hardware)"
NOT_PROVED = "refused (qualification): qualification.task-not-proved: "
EVERY = ("chat", "embed", "rerank", "tools", "structured-output", "vision-input")


class Cli(BaseCli):
    def __init__(self, home: Path, catalog: Path) -> None:
        super().__init__(
            home, timeout_s=900, NODEAU_SIMULATED_GPUS="1 x 24 GiB", NODEAU_CATALOG=str(catalog)
        )


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    # A catalog of the user's own that lists none of these models: each is imported, and
    # claims only what it proves (the shipped catalog lists SmolLM2's bytes; see the end
    # of the first test).
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_json(Catalog()), encoding="utf-8")
    c = Cli(tmp_path / "home", catalog)
    yield c
    done = c("ps", "--json")
    if done.returncode == 0:
        for row in json.loads(done.stdout):
            c("stop", row["name"], "--workload")


def qualify(cli: Cli, model: str) -> dict[str, Any]:
    done = cli("model", "qualify", model, "--context", CONTEXT, "--seed", SEED, "--json")
    assert done.returncode == 0, done.stderr
    view: dict[str, Any] = json.loads(done.stdout)
    return view


def outcomes(view: dict[str, Any]) -> dict[str, str]:
    return {p["capability"]: p["outcome"] for p in view["probes"]}


def states(cli: Cli, model: str) -> dict[str, str]:
    info = cli.json("model", "info", model)
    assert isinstance(info, dict)
    return {c["capability"]: c["state"] for c in info["capabilities"]}


def servers_of(home: Path) -> list[int]:
    """Model servers still running on this test's model files."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(str(home) in part for part in p.info["cmdline"] or ()):
            found.append(p.info["pid"])
    return found


def assert_evidence_is_whole(view: dict[str, Any], tasks: tuple[str, ...]) -> None:
    assert view["runtime"].startswith("llama-server ")
    assert "simulated" in view["card"]
    assert view["seed"] == int(SEED)
    assert view["context_tokens"] == int(CONTEXT)
    assert {p["capability"] for p in view["probes"]} == set(EVERY)
    for probe in view["probes"]:
        assert probe["why"], probe
        if probe["outcome"] != "not applicable":
            assert probe["asked"] and probe["answered"], probe
    assert [m["task"] for m in view["memory"]] == list(tasks)
    for m in view["memory"]:
        # the runtime's own figures on simulated hardware: never a card's measurement
        assert (m["source"], m["measured"]) == (BUFFERS, False)
        assert m["peak_bytes"] > 0
        assert f"ctx={CONTEXT}" in m["config"]


def test_smollm2_proves_chat_and_structured_output_and_runs_only_what_it_proved(
    cli: Cli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    assert cli("models", "import", str(fetch(SMOLLM2)), "--alias", "smol").returncode == 0
    assert set(states(cli, "smol").values()) == {"never qualified"}
    refused = cli("run", "smol")
    assert refused.returncode == 2
    assert NOT_PROVED + "smol has not proved it can chat (it was never qualified)" in (
        refused.stderr
    )
    assert "nodeau model qualify smol" in refused.stderr

    view = qualify(cli, "smol")
    assert outcomes(view) == {
        "chat": "passed",
        "tools": "failed",
        "structured-output": "passed",
        "vision-input": "failed",
        "embed": "failed",
        "rerank": "failed",
    }, view["probes"]  # (on a failure, each probe's evidence)
    assert view["claims"] == ["chat", "structured-output"]
    assert_evidence_is_whole(view, ("chat", "embed", "rerank"))
    # the shipped catalog claims for this model exactly what qualification proves
    [entry] = JsonCatalogFile(shipped_catalog()).load().entries
    assert [c.value for c in entry.capabilities] == view["claims"]
    # it stopped what it started: no workload, no model server left
    assert cli.json("ps") == []
    assert servers_of(home) == []

    info = cli.json("model", "info", "smol")
    assert isinstance(info, dict)
    assert info["measured"] == []  # simulated hardware: nothing recorded as a card's VRAM
    assert states(cli, "smol") == outcomes(view)
    chat = next(c for c in info["capabilities"] if c["capability"] == "chat")
    assert chat["evidence"] == next(p["why"] for p in view["probes"] if p["capability"] == "chat")
    assert view["runtime"] in info["qualified"]

    assert cli("run", "smol", "--context", CONTEXT).returncode == 0
    rows = cli.json("ps")
    assert isinstance(rows, list)
    client = openai.OpenAI(base_url=rows[0]["endpoint"], api_key="unused", timeout=120)
    reply = client.chat.completions.create(
        model="smol",
        messages=[{"role": "user", "content": "Say the word zebra."}],
        max_tokens=16,
        temperature=0,
    )
    assert "zebra" in (reply.choices[0].message.content or "").lower()
    embed = cli("run", "smol", "--name", "vectors", "--task", "embed")
    assert embed.returncode == 2
    assert NOT_PROVED + "smol has not proved it can embed (its embed probe failed" in embed.stderr

    # other bytes under the same alias start with no evidence at all
    other = write_tiny_llama(tmp_path / "other.gguf", seed=5, quant="q8_0")
    assert cli("models", "import", str(other), "--alias", "smol").returncode == 0
    assert set(states(cli, "smol").values()) == {"never qualified"}
    again = cli("run", "smol", "--name", "again")
    assert again.returncode == 2
    assert "(it was never qualified)" in again.stderr


def test_the_random_tiny_llama_fails_every_probe_and_runs_nothing(cli: Cli, tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tiny.gguf", seed=3, quant="q8_0")
    assert cli("models", "import", str(path), "--alias", "tiny").returncode == 0
    view = qualify(cli, "tiny")
    assert outcomes(view) == dict.fromkeys(EVERY, "failed")
    assert view["claims"] == []
    assert_evidence_is_whole(view, ("chat", "embed", "rerank"))
    refused = cli("run", "tiny")
    assert refused.returncode == 2
    assert NOT_PROVED + "tiny has not proved it can chat (its chat probe failed" in refused.stderr
    # the user's explicit choice still serves it, and says nothing is proved by running it
    assert cli("run", "tiny", "--unproved", "--context", "256").returncode == 0
    assert servers_of(tmp_path / "home") != []


def test_minilm_proves_embed_and_its_generative_capabilities_do_not_apply(cli: Cli) -> None:
    assert cli("models", "import", str(fetch_minilm()), "--alias", "minilm").returncode == 0
    view = qualify(cli, "minilm")
    generative = ("chat", "tools", "structured-output", "vision-input")
    assert outcomes(view) == {
        **dict.fromkeys(generative, "not applicable"),
        "embed": "passed",
        "rerank": "failed",
    }
    assert_evidence_is_whole(view, ("embed", "rerank"))
    for probe in view["probes"]:
        if probe["capability"] in generative:
            assert "bert is an encoder" in probe["why"]
    assert cli("run", "minilm", "--task", "embed", "--context", "256").returncode == 0
    rows = cli.json("ps")
    assert isinstance(rows, list)
    client = openai.OpenAI(base_url=rows[0]["endpoint"], api_key="unused", timeout=120)
    vectors = client.embeddings.create(model="minilm", input=["a cat sat on the mat"])
    assert len(vectors.data[0].embedding) == 384
    chat = cli("run", "minilm", "--name", "talk")
    assert chat.returncode == 2
    assert "(chat does not apply to it: bert is an encoder" in chat.stderr
