"""Memory prediction against what the real llama-server reports at load (``-s`` prints a table).

Generated and real shapes at a few contexts, started with the product's command line: the model's
predicted terms never under the reported buffers, at most 20% over (15% generated); the admission
figure never under ``llama-fit-params``' estimate by more than the margin.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from attrs import frozen

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.llama_server import free_port, server_command
from nodeau.adapters.runtime_buffers import ReportedBuffers, reported_buffers
from nodeau.adapters.runtime_estimate import runtime_estimate
from nodeau.domain.allowances import Allowances
from nodeau.domain.memory import MIB, RuntimeConfig, estimate_peak
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import FitEstimate, ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_gemma3, write_tiny_llama
from tests.support.real.llama import llama_server_binary
from tests.support.real.real_models import GEMMA3_270M, SMOLLM2, fetch, fetch_minilm

pytestmark = pytest.mark.slow

# Below verbosity 4 llama-server does not print its buffers. Without --no-repack, llama.cpp on
# the CPU keeps a second, repacked copy of some quantised weights: a CPU-only duplicate (like
# the AMX one in NOTES-llamacpp.md) that no card has.
EXTRA_FLAGS = ("-lv", "4", "--no-repack")
READY_S = 120.0
MODEL_TERMS = ("weights", "kv cache", "compute buffer", "output buffer")
GENERATED_OVER = 1.15
REAL_OVER = 1.20


@frozen(kw_only=True)
class Shape:
    name: str
    make: Callable[[Path], Path]
    generated: bool


def _generated(file: str, **kwargs: object) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / file
        if not path.exists():
            write_tiny_llama(path, context=16384, **kwargs)  # type: ignore[arg-type]
        return path

    return make


SHAPES = {
    "mha": Shape(name="mha", make=_generated("mha.gguf"), generated=True),
    "gqa": Shape(
        name="gqa",
        make=_generated(
            "gqa.gguf", n_layers=4, n_embd=256, n_head=8, n_head_kv=2, n_ff=512, quant="f16"
        ),
        generated=True,
    ),
    "vocab-152k": Shape(
        name="vocab-152k",
        make=_generated("vocab.gguf", vocab_size=151_936, quant="f16"),
        generated=True,
    ),
    "moe-8x2": Shape(
        name="moe-8x2", make=_generated("moe.gguf", n_expert=8, n_expert_used=2), generated=True
    ),
    "swa-gemma3": Shape(
        name="swa-gemma3",
        make=lambda folder: (
            folder / "swa.gguf"
            if (folder / "swa.gguf").exists()
            else write_tiny_gemma3(folder / "swa.gguf", context=16384)
        ),
        generated=True,
    ),
    "smollm2-135m": Shape(name="smollm2-135m", make=lambda _: fetch(SMOLLM2), generated=False),
    "gemma3-270m": Shape(name="gemma3-270m", make=lambda _: fetch(GEMMA3_270M), generated=False),
    "minilm-l6": Shape(name="minilm-l6", make=lambda _: fetch_minilm(), generated=False),
}

# (shape, context, task, flash attention)
CASES = [
    *((s, c, Task.CHAT, False) for s in ("mha", "gqa", "moe-8x2") for c in (256, 512, 4096, 16384)),
    ("vocab-152k", 512, Task.CHAT, False),
    ("vocab-152k", 4096, Task.CHAT, False),
    ("vocab-152k", 512, Task.EMBED, False),
    ("gqa", 4096, Task.CHAT, True),
    ("swa-gemma3", 4096, Task.CHAT, False),
    ("swa-gemma3", 16384, Task.CHAT, True),
    *(("smollm2-135m", c, Task.CHAT, False) for c in (512, 4096, 16384)),
    ("smollm2-135m", 4096, Task.CHAT, True),
    *(("gemma3-270m", c, Task.CHAT, False) for c in (512, 4096, 16384)),
    ("gemma3-270m", 4096, Task.CHAT, True),
    ("minilm-l6", 256, Task.EMBED, False),
    ("minilm-l6", 512, Task.EMBED, False),
]


@pytest.fixture(scope="module")
def binary() -> Path:
    return llama_server_binary()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shapes")


def served_buffers(binary: Path, spec: ServerSpec) -> ReportedBuffers:
    """Start llama-server for ``spec`` until it is ready, stop it, and read its buffers."""
    port = free_port()
    command = [*server_command(binary, spec, port), *EXTRA_FLAGS]
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}}
    env["CUDA_VISIBLE_DEVICES"] = ""
    with spec.log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_ready(process, port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    text = spec.log_path.read_text(errors="replace")
    buffers = reported_buffers(text)
    if buffers is None:
        pytest.fail(f"llama-server printed no buffers; its log ends: {text[-1500:]}")
    return buffers


def _wait_ready(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + READY_S
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"llama-server exited with {process.returncode} while loading")
            try:
                if client.get("/health", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    pytest.fail(f"llama-server was not ready within {READY_S} s")


@pytest.fixture(scope="module")
def table() -> Iterator[list[str]]:
    rows: list[str] = []
    yield rows
    print(
        "\n| shape | context | task | fa | reported MiB | predicted MiB | ratio "
        "| runtime's estimate MiB | admission MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


@pytest.mark.parametrize(
    ("shape", "context", "task", "flash"),
    CASES,
    ids=[f"{s}-{c}-{t.value}{'-fa' if f else ''}" for s, c, t, f in CASES],
)
def test_prediction_covers_what_llama_server_reports_and_not_much_more(
    binary: Path,
    folder: Path,
    table: list[str],
    shape: str,
    context: int,
    task: Task,
    flash: bool,
) -> None:
    model = SHAPES[shape].make(folder)
    config = RuntimeConfig(context_tokens=context, task=task, flash_attention=flash)
    spec = ServerSpec(
        name=shape,
        model_path=model,
        config=config,
        gpu_uuid=None,
        log_path=folder / "logs" / f"{shape}-{context}-{task.value}-{flash}.log",
    )
    reported = served_buffers(binary, spec)
    arch = GgufModelInspector().inspect(model).architecture
    prediction = estimate_peak(arch, model.stat().st_size, config, Allowances())
    predicted = sum(t.bytes for t in prediction.terms if t.name in MODEL_TERMS)
    ratio = predicted / reported.total_bytes
    fit = runtime_estimate(binary, spec, {**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert isinstance(fit, FitEstimate), fit
    assert fit.where == "host"  # the CPU build: its estimate is of the host's memory
    table.append(
        f"| {shape} | {context} | {task.value} | {'on' if flash else 'off'} "
        f"| {reported.total_bytes / MIB:.2f} | {predicted / MIB:.2f} | {ratio:.3f} "
        f"| {fit.bytes / MIB:.0f} | {prediction.total_bytes / MIB:.2f} |"
    )
    margin = sum(t.bytes for t in prediction.terms if t.name == "margin")
    assert prediction.total_bytes >= fit.bytes - margin, (fit, prediction)
    assert predicted >= reported.total_bytes, (reported, prediction)
    limit = GENERATED_OVER if SHAPES[shape].generated else REAL_OVER
    assert predicted <= limit * reported.total_bytes, (reported, prediction)
