"""llama-cpp-python's server as the model runtime: what only it does.

The shared ModelRuntime contract is in tests/integration/test_llama_server_runtime.py. The
package is found as the product finds it (``choose_runtime``); without it these tests fail
with how to install it, never skip.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from gguf import GGUFValueType, Keys

from nodeau.adapters.llama_cpp_python import (
    NO_RERANK,
    SETTINGS,
    LlamaCppPythonRuntime,
    child_environment,
    server_command,
)
from nodeau.adapters.llama_server import LIB_ENV
from nodeau.domain.memory import CacheType, RuntimeConfig, kv_cells
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import RunningServer, RuntimeFailure, ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.llama import llama_cpp_python_runtime

READY_S = 60.0  # generous: a tiny model is ready in about a second


@pytest.fixture
def runtime() -> LlamaCppPythonRuntime:
    return llama_cpp_python_runtime()


@pytest.fixture
def servers(runtime: LlamaCppPythonRuntime) -> Iterator[list[RunningServer]]:
    started: list[RunningServer] = []
    yield started
    for server in started:
        runtime.stop(server, grace_s=2.0)


def spec_for(tmp_path: Path, model: Path, name: str = "tiny", **config: object) -> ServerSpec:
    return ServerSpec(
        name=name,
        model_path=model,
        config=RuntimeConfig(**{"context_tokens": 256, **config}),  # type: ignore[arg-type]
        gpu_uuid=None,
        log_path=tmp_path / "logs" / f"{name}.log",
    )


# -- the command line and environment (no process) ---------------------------------------------


def test_the_command_passes_every_admitted_setting(tmp_path: Path) -> None:
    spec = ServerSpec(
        name="qwen",
        model_path=tmp_path / "m.gguf",
        config=RuntimeConfig(
            context_tokens=8192,
            batch=1024,
            ubatch=256,
            cache_type_k=CacheType.Q8_0,
            cache_type_v=CacheType.Q4_0,
            flash_attention=True,
            task=Task.EMBED,
        ),
        gpu_uuid="GPU-1",
        log_path=tmp_path / "log",
    )
    assert server_command(Path("/venv/bin/python"), spec, 41000) == (
        "/venv/bin/python", "-I", "-m", "llama_cpp.server",
        "--model", str(tmp_path / "m.gguf"),
        "--model_alias", "qwen",
        "--host", "127.0.0.1",
        "--port", "41000",
        "--n_ctx", "8192",
        "--n_batch", "1024",
        "--n_ubatch", "256",
        "--type_k", "8",  # ggml's numbers: q8_0 is 8, q4_0 is 2
        "--type_v", "2",
        "--flash_attn", "true",
        "--n_gpu_layers", "999",
        "--embedding", "true",
        "--logits_all", "false",
        "--use_mlock", "false",
        "--interrupt_requests", "false",
        "--verbose", "true",
    )  # fmt: skip
    cpu_chat = server_command(Path("python"), spec_for(tmp_path, tmp_path / "m.gguf"), 1)
    assert cpu_chat[cpu_chat.index("--n_gpu_layers") + 1] == "0"
    assert cpu_chat[cpu_chat.index("--embedding") + 1] == "false"
    assert cpu_chat[cpu_chat.index("--flash_attn") + 1] == "false"
    assert cpu_chat[cpu_chat.index("--type_k") + 1] == "1"  # f16


def test_the_settings_dropped_from_the_environment_are_the_servers_own(
    runtime: LlamaCppPythonRuntime,
) -> None:
    """Each setting is read from an environment variable of its name: all are known."""
    spec = spec_for(Path("."), Path("x"))
    done = subprocess.run(
        [*runtime.command(spec, 1)[:4], "--help"],
        env=runtime.environment(os.environ, spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert set(re.findall(r"^  --(\w+)", done.stdout, re.MULTILINE)) - {"help"} == SETTINGS


def test_the_environment_drops_server_settings_and_points_at_the_library() -> None:
    base = {"PATH": "/bin", "PORT": "80", "host": "0.0.0.0", "CONFIG_FILE": "x", "API_KEY": "k"}
    assert child_environment(base, None, Path("/lib")) == {
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "",
        LIB_ENV: "/lib",
    }
    mine = {"PATH": "/bin", LIB_ENV: "/mine", "LLAMA_ARG_CTX_SIZE": "1"}
    assert child_environment(mine, "GPU-1", Path("/lib")) == {
        "PATH": "/bin",
        LIB_ENV: "/mine",
        "CUDA_VISIBLE_DEVICES": "GPU-1",
        "NVIDIA_VISIBLE_DEVICES": "GPU-1",
    }


# -- a real server -----------------------------------------------------------------------------


def test_a_rerank_workload_is_refused_clearly(
    tmp_path: Path, runtime: LlamaCppPythonRuntime
) -> None:
    model = write_tiny_llama(tmp_path / "m.gguf", quant="f32")
    with pytest.raises(RuntimeFailure) as caught:
        runtime.start(spec_for(tmp_path, model, name="rr", task=Task.RERANK), READY_S)
    assert str(caught.value) == NO_RERANK
    assert "no /v1/rerank" in NO_RERANK and "NODEAU_LLAMA_SERVER" in NO_RERANK
    assert not (tmp_path / "logs" / "rr.log").exists()  # refused before any process


def test_the_openai_client_chats_and_embeds(
    tmp_path: Path, runtime: LlamaCppPythonRuntime, servers: list[RunningServer]
) -> None:
    model = write_tiny_llama(tmp_path / "m.gguf", quant="q8_0", context=4096)
    chat = runtime.start(spec_for(tmp_path, model, name="chat"), READY_S)
    servers.append(chat)
    # it declares its pooling (mean), as converted embedding models do; without one this
    # server answers a vector per token (llama-server refuses: "not OAI compatible")
    pooling = {Keys.LLM.POOLING_TYPE.format(arch="llama"): (1, GGUFValueType.UINT32)}
    pooled = write_tiny_llama(tmp_path / "e.gguf", quant="q8_0", override_keys=pooling)
    embed = runtime.start(spec_for(tmp_path, pooled, name="embed", task=Task.EMBED), READY_S)
    servers.append(embed)
    refused = openai.OpenAI(base_url=f"{chat.base_url}/v1", api_key="local", max_retries=0)
    with refused, pytest.raises(openai.AuthenticationError):  # only its own key is answered
        refused.models.list()
    with openai.OpenAI(base_url=f"{chat.base_url}/v1", api_key=chat.api_key) as client:
        reply = client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "Say hello."}], max_tokens=4
        )
        assert reply.model == "chat"
        assert isinstance(reply.choices[0].message.content, str)
        assert reply.usage is not None and reply.usage.completion_tokens >= 1
        assert [m.id for m in client.models.list()] == ["chat"]
    with openai.OpenAI(base_url=f"{embed.base_url}/v1", api_key=embed.api_key) as client:
        vectors = client.embeddings.create(model="embed", input=["hello", "world"])
        assert [len(d.embedding) for d in vectors.data] == [64, 64]  # the tiny model's n_embd


@pytest.mark.parametrize("context", [100, 256, 300, 1024])
def test_the_allocated_context_is_the_padded_configured_context(
    tmp_path: Path,
    runtime: LlamaCppPythonRuntime,
    servers: list[RunningServer],
    context: int,
) -> None:
    """One sequence whose KV cache is the context padded to 256 cells (its load report):
    what nodeau.domain.memory.kv_cells counts. It has no slots, so parallel changes nothing."""
    model = write_tiny_llama(tmp_path / "m.gguf", quant="f32", context=4096)
    spec = spec_for(tmp_path, model, context_tokens=context, parallel=2)
    servers.append(runtime.start(spec, READY_S))
    log = spec.log_path.read_text()
    assert re.findall(r"llama_context: n_ctx\s+= (\d+)", log) == [str(kv_cells(spec.config))]
    cells = re.findall(r"llama_kv_cache: size = .*\(\s*(\d+) cells, .* (\d+)/\d+ seqs\)", log)
    assert cells == [(str(kv_cells(spec.config)), "1")]
