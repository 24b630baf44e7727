"""Benchmark on a real card: predicted peak VRAM against NVML's per-process peak.

Usage: python bench/gpu_memory.py --server PATH [--out table.md] [--quick]
Run by bench/gpu_check.sh on an NVIDIA machine, never by the tests. Prints a Markdown table with
the goals: never under, median at most +5%, worst at most +15% (method: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx
from gguf import GGUFValueType, Keys

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.llama_server import LlamaServerRuntime
from nodeau.adapters.model_server_process import SOURCE_NVML
from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.adapters.runtime_buffers import reported_buffers
from nodeau.adapters.runtime_estimate import FitTool
from nodeau.domain.allowances import Allowances
from nodeau.domain.memory import MIB, CacheType, RuntimeConfig, estimate_peak
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import FitEstimate, RunningServer, ServerSpec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.builders.tiny_gguf import (  # noqa: E402
    write_tiny_gemma3,
    write_tiny_llama,
)

SHAPES = {
    "dense-f16": {"n_layers": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 16, "n_ff": 2816,
                  "quant": "f16"},
    "gqa-q8": {"n_layers": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 4, "n_ff": 2816,
               "quant": "q8_0"},
    # sliding-window attention on 5 of every 6 layers (a generated Gemma 3)
    "swa-gemma3": {"n_layers": 12, "n_embd": 1024, "n_head": 8, "n_head_kv": 4,
                   "head_dim": 128, "n_ff": 4096, "sliding_window": 1024, "quant": "f16"},
    # large enough that the runtime's fixed allowance is not most of the figure
    "gqa-1b": {"n_layers": 16, "n_embd": 2048, "n_head": 16, "n_head_kv": 4, "n_ff": 5632,
               "quant": "f16"},
    "moe-8x2": {"n_layers": 4, "n_embd": 512, "n_head": 8, "n_head_kv": 2, "n_ff": 1024,
                "n_expert": 8, "n_expert_used": 2, "quant": "f16"},
    "vocab-152k": {"n_layers": 4, "n_embd": 512, "n_head": 8, "n_head_kv": 8, "n_ff": 1024,
                   "vocab_size": 151_936, "quant": "f16"},
    # an embedding model declares its pooling (mean), as converted ones do
    "embed-mean": {"n_layers": 4, "n_embd": 384, "n_head": 6, "n_head_kv": 6, "n_ff": 1536,
                   "quant": "f16",
                   "override_keys": {Keys.LLM.POOLING_TYPE.format(arch="llama"):
                                     (1, GGUFValueType.UINT32)}},
}  # fmt: skip
CASES = (
    [
        (shape, context, kv, flash, Task.CHAT)
        for shape in ("dense-f16", "gqa-q8", "moe-8x2", "swa-gemma3")
        for context in (4096, 32768, 131072)
        for kv in (CacheType.F16, CacheType.Q8_0)
        for flash in (False, True)
        if not (kv is CacheType.Q8_0 and not flash)  # a quantised V cache needs flash attention
    ]
    + [
        ("gqa-1b", context, kv, flash, Task.CHAT)
        for context, kv, flash in (
            (4096, CacheType.F16, False),
            (4096, CacheType.F16, True),
            (32768, CacheType.F16, True),
            (32768, CacheType.Q8_0, True),
            (131072, CacheType.Q8_0, True),
        )
    ]
    + [
        ("vocab-152k", 4096, CacheType.F16, True, Task.CHAT),
        ("embed-mean", 4096, CacheType.F16, False, Task.EMBED),
    ]
)
QUICK = {
    ("dense-f16", 4096),
    ("gqa-q8", 32768),
    ("moe-8x2", 4096),
    ("gqa-1b", 4096),
    ("embed-mean", 4096),
}
MODEL_TERMS = ("weights", "kv cache", "compute buffer", "output buffer", "runtime footprint")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, required=True, help="a CUDA llama-server")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--quick", action="store_true", help="one case per shape")
    args = parser.parse_args()
    nvml = NvmlGpuInventory("gpu-check")
    [card, *_] = nvml.read().gpus
    runtime = LlamaServerRuntime(args.server, inventory_memory=nvml.process_memory)
    fit = FitTool(os.environ)
    title = (
        f"# Predicted vs NVML peak on {card.gpu.model} ({datetime.now(UTC):%Y-%m-%d}, "
        f"driver {card.driver_version}, {args.server.parent.parent.name})"
    )
    lines = [title, "", HEADER, SEPARATOR]
    _write(args.out, lines)
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for shape, context, kv, flash, task in CASES:
            if args.quick and (shape, context) not in QUICK:
                continue
            try:
                row, ratio, raw = _case(
                    runtime, nvml, fit, args.server, card.gpu.uuid, Path(folder),
                    shape, context, kv, flash, task,
                )  # fmt: skip
            except Exception as exc:  # one case's failure is a row; the others still run
                row, ratio = f"| {shape} | {context} | {kv.value} | {flash} | failed: {exc} |", None
                raw = {"shape": shape, "context": context, "failed": str(exc)}
            if args.out is not None:  # every figure, to recompute the predictions without a card
                with args.out.with_suffix(".jsonl").open("a") as kept:
                    kept.write(json.dumps(raw) + "\n")
            print(row, flush=True)
            lines.append(row)
            _write(args.out, lines)
            if ratio is not None:
                ratios.append(ratio)
    under = sum(r < 1 for r in ratios)
    summary = (
        f"never under: {'met' if under == 0 else f'NOT met ({under} under)'}; "
        f"median {statistics.median(ratios):.3f} (goal <= 1.05); "
        f"worst {max(ratios):.3f} (goal <= 1.15); {len(ratios)} cases"
        if ratios
        else "no case gave a reading"
    )
    lines += ["", summary]
    print(summary)
    _write(args.out, lines)
    return 0


HEADER = (
    "| shape | context | KV | fa | task | NVML process MiB | card used MiB | reported MiB "
    "| predicted MiB | ratio | llama-fit MiB | admission MiB (with margin) |"
)
SEPARATOR = "|---" * 12 + "|"


def _case(
    runtime: LlamaServerRuntime,
    nvml: NvmlGpuInventory,
    fit: FitTool,
    server_path: Path,
    uuid: str,
    folder: Path,
    shape: str,
    context: int,
    kv: CacheType,
    flash: bool,
    task: Task,
) -> tuple[str, float | None, dict[str, object]]:
    """One case: serve it on the card, fill a micro-batch, read every figure there is.

    The ratio is predicted over NVML's figure for the process, or over the card's used
    memory (free before the start less free after the request) where NVML lists no
    process (inside some sandboxes it lists none).
    """
    model = folder / f"{shape}.gguf"  # one file a shape: the context is asked of the server
    if not model.exists():
        write = write_tiny_gemma3 if shape.startswith("swa-") else write_tiny_llama
        write(model, context=131072, **SHAPES[shape])  # type: ignore[operator]
    config = RuntimeConfig(
        context_tokens=context, task=task, flash_attention=flash, cache_type_k=kv, cache_type_v=kv
    )
    log = folder / f"{shape}-{context}-{kv.value}-{flash}.log"
    spec = ServerSpec(
        name=shape, model_path=model, config=config, gpu_uuid=uuid, log_path=log,
        log_buffers=True,
    )  # fmt: skip
    free_before = _free(nvml, uuid)
    server = runtime.start(spec, 120.0)
    try:
        _one_request(server, task, config.ubatch)
        used = runtime.memory(server)
        card_used = free_before - _free(nvml, uuid)
    finally:
        runtime.stop(server, 10.0)
    process = used.bytes if used is not None and used.source == SOURCE_NVML else None
    said = log.read_text(errors="replace")
    reported = reported_buffers(said)
    estimate = fit.estimate(server_path, spec)
    arch = GgufModelInspector().inspect(model).architecture
    prediction = estimate_peak(arch, model.stat().st_size, config, Allowances())
    predicted = sum(t.bytes for t in prediction.terms if t.name in MODEL_TERMS)
    reading = process if process is not None else card_used
    ratio = predicted / reading if reading > 0 else None
    row = (
        f"| {shape} | {context} | {kv.value} | {'on' if flash else 'off'} | {task.value} "
        f"| {_mib(process)} | {_mib(card_used)}{'' if process is not None else ' (used)'} "
        f"| {_mib(reported.total_bytes if reported else None)} | {_mib(predicted)} "
        f"| {'-' if ratio is None else f'{ratio:.3f}'} "
        f"| {_mib(estimate.bytes) if isinstance(estimate, FitEstimate) else estimate} "
        f"| {_mib(prediction.total_bytes)} |"
    )
    raw = {
        "shape": shape, "context": context, "kv": kv.value, "flash": flash, "task": task.value,
        "nvml_process": process, "card_used": card_used, "predicted": predicted,
        "terms": {t.name: t.bytes for t in prediction.terms},
        "fit": estimate.bytes if isinstance(estimate, FitEstimate) else estimate,
        "buffers": [line for line in said.splitlines() if "buffer size" in line or "CUDA" in line],
    }  # fmt: skip
    return row, ratio, raw


def _free(nvml: NvmlGpuInventory, uuid: str) -> int:
    return next(r.free_bytes for r in nvml.read().gpus if r.gpu.uuid == uuid)


def _mib(size: int | None) -> str:
    return "-" if size is None else f"{size / MIB:.0f}"


def _write(out: Path | None, lines: list[str]) -> None:
    """The table so far, so that a run cut short by its limit still leaves its rows."""
    if out is not None:
        out.write_text("\n".join(lines) + "\n")


def _one_request(server: RunningServer, task: Task, tokens: int) -> None:
    """One request whose prompt fills a micro-batch, so the compute buffers are used (with
    the key the model server asks for: only the endpoint is meant to reach it)."""
    text = "word " * max(8, tokens - 16)
    with httpx.Client(
        base_url=server.base_url, timeout=120, trust_env=False, headers=server.auth_headers
    ) as http:
        if task is Task.EMBED:  # an embedding's input is one micro-batch at most
            short = "a" * max(8, tokens // 4)
            http.post("/v1/embeddings", json={"input": short}).raise_for_status()
        else:
            http.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": text}], "max_tokens": 4},
            ).raise_for_status()


if __name__ == "__main__":
    sys.exit(main())
