"""The qualification probes against real llama-server processes serving real models.

Outcomes are those observed over several seeds (docs/probes.md): the random tiny llama fails
everything; SmolLM2-135M-Instruct passes chat and structured output only; all-MiniLM-L6-v2
passes embed and fails rerank. A missing binary fails, never skips.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from nodeau.adapters.llama_server import LlamaServerRuntime
from nodeau.adapters.probe_client import run_probes
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.probes import probes_for
from nodeau.domain.qualification import Capability, ProbeOutcome, ProbeResult
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import RunningServer, ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.llama import llama_server_binary
from tests.support.real.real_models import SMOLLM2, fetch

pytestmark = pytest.mark.slow

READY_S = 60.0
TIMEOUT_S = 120.0
SEEDS = (0, 1, 2)
MODEL = "probed"
NOT_A_REPLY = "a reply is not"

SMOLLM2_PASSES = {
    Capability.CHAT: ProbeOutcome.PASSED,
    Capability.TOOLS: ProbeOutcome.FAILED,
    Capability.STRUCTURED_OUTPUT: ProbeOutcome.PASSED,
    Capability.VISION_INPUT: ProbeOutcome.FAILED,
    Capability.EMBED: ProbeOutcome.FAILED,
    Capability.RERANK: ProbeOutcome.FAILED,
}


@pytest.fixture(scope="module")
def binary() -> Path:
    return llama_server_binary()


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny.gguf")


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return fetch(SMOLLM2)


@contextmanager
def served(binary: Path, model: Path, task: Task, logs: Path) -> Iterator[RunningServer]:
    """A llama-server for ``task`` serving ``model`` on the CPU; stopped whatever happens."""
    runtime = LlamaServerRuntime(binary)
    spec = ServerSpec(
        name=MODEL,
        model_path=model,
        config=RuntimeConfig(context_tokens=1024, task=task),
        gpu_uuid=None,
        log_path=logs / f"{model.stem}-{task.value}.log",
    )
    server = runtime.start(spec, READY_S)
    try:
        yield server
    finally:
        runtime.stop(server, grace_s=2.0)


def probe_over_seeds(server: RunningServer, task: Task) -> list[ProbeResult]:
    return [
        result
        for seed in SEEDS
        for result in run_probes(
            server.base_url,
            task,
            MODEL,
            random.Random(seed),
            headers=server.auth_headers,
            timeout_s=TIMEOUT_S,
        )
    ]


@pytest.mark.parametrize("task", list(Task))
def test_the_random_tiny_llama_fails_every_probe(
    binary: Path, tiny_llama: Path, tmp_path: Path, task: Task
) -> None:
    with served(binary, tiny_llama, task, tmp_path) as server:
        results = probe_over_seeds(server, task)
    assert [r.capability for r in results] == list(probes_for(task)) * len(SEEDS)
    for result in results:
        assert result.outcome is ProbeOutcome.FAILED, result
        assert result.why


def test_smollm2_passes_chat_and_structured_output_and_fails_tools_and_vision(
    binary: Path, smollm2: Path, tmp_path: Path
) -> None:
    with served(binary, smollm2, Task.CHAT, tmp_path) as server:
        results = probe_over_seeds(server, Task.CHAT)
    for result in results:
        assert result.outcome is SMOLLM2_PASSES[result.capability], result
    vision = [r for r in results if r.capability is Capability.VISION_INPUT]
    assert all("image input is not supported" in r.answered for r in vision)
    # SmolLM2's greedy answer differs from one CPU to another (docs/probes.md), so only that
    # tools failed on a real reply is asserted, not why.
    for result in (r for r in results if r.capability is Capability.TOOLS):
        assert not result.why.startswith(NOT_A_REPLY), result


@pytest.mark.parametrize(
    ("task", "evidence"),
    [
        (Task.EMBED, "Pooling type 'none' is not OAI compatible"),
        (Task.RERANK, "the relevant passage"),
    ],
)
def test_smollm2_fails_embed_and_rerank(
    binary: Path, smollm2: Path, tmp_path: Path, task: Task, evidence: str
) -> None:
    with served(binary, smollm2, task, tmp_path) as server:
        results = probe_over_seeds(server, task)
    for result in results:
        assert result.outcome is SMOLLM2_PASSES[result.capability], result
        assert evidence in f"{result.answered} {result.why}"


def test_minilm_passes_embed_and_fails_rerank(binary: Path, tmp_path: Path) -> None:
    from tests.support.real.real_models import fetch_minilm

    minilm = fetch_minilm()
    with served(binary, minilm, Task.EMBED, tmp_path) as server:
        embedded = probe_over_seeds(server, Task.EMBED)
    with served(binary, minilm, Task.RERANK, tmp_path) as server:
        reranked = probe_over_seeds(server, Task.RERANK)
    # Observed: its paraphrases at 0.63 to 0.92 cosine, unrelated sentences at most 0.35;
    # with no classifier head its rerank scores do not pick the relevant passage.
    assert [r.outcome for r in embedded] == [ProbeOutcome.PASSED] * len(SEEDS), embedded
    assert [r.outcome for r in reranked] == [ProbeOutcome.FAILED] * len(SEEDS), reranked
