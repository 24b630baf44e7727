"""Benchmark on a real card: predicted peak VRAM against NVML's per-process peak.

    python bench/gpu_memory.py --server PATH [--out table.md] [--quick]

Run by bench/gpu_check.sh on a machine with an NVIDIA card (never by the test suite). For
each case of the admission matrix (generated dense, GQA, MoE and large-vocabulary llamas, a
mean-pooled embedding model; f16 and q8_0 KV; flash attention on and off; contexts 4k to
128k) the real llama-server is started on the first card with the product's own command
line, sent one request of a full micro-batch, and read by NVML per process (its pools keep
their high-water mark, so the reading after the request is the peak). The prediction is
the admission's: weights + KV + compute + output + the runtime footprint, the margin
apart. Prints and writes a Markdown table, with the goals on a card: never under, median
at most +5%, worst at most +15%.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx
from gguf import GGUFValueType, Keys

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.llama_server import LlamaServerRuntime
from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.domain.allowances import Allowances
from nodeau.domain.memory import MIB, CacheType, RuntimeConfig, estimate_peak
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import ServerSpec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.builders.tiny_gguf import write_tiny_llama  # noqa: E402

SHAPES = {
    "dense-f16": {"n_layers": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 16, "n_ff": 2816,
                  "quant": "f16"},
    "gqa-q8": {"n_layers": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 4, "n_ff": 2816,
               "quant": "q8_0"},
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
CASES = [
    (shape, context, kv, flash, Task.CHAT)
    for shape in ("dense-f16", "gqa-q8", "moe-8x2")
    for context in (4096, 32768, 131072)
    for kv in (CacheType.F16, CacheType.Q8_0)
    for flash in (False, True)
    if not (kv is CacheType.Q8_0 and not flash)  # a quantised V cache needs flash attention
] + [
    ("vocab-152k", 4096, CacheType.F16, True, Task.CHAT),
    ("embed-mean", 4096, CacheType.F16, False, Task.EMBED),
]
QUICK = {("dense-f16", 4096), ("gqa-q8", 32768), ("moe-8x2", 4096), ("embed-mean", 4096)}
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
    rows, ratios = [], []
    with tempfile.TemporaryDirectory() as folder:
        for shape, context, kv, flash, task in CASES:
            if args.quick and (shape, context) not in QUICK:
                continue
            model = Path(folder) / f"{shape}-{context}.gguf"
            if not model.exists():
                write_tiny_llama(model, context=context, **SHAPES[shape])  # type: ignore[arg-type]
            config = RuntimeConfig(
                context_tokens=context, task=task, flash_attention=flash,
                cache_type_k=kv, cache_type_v=kv,
            )  # fmt: skip
            spec = ServerSpec(
                name=shape, model_path=model, config=config, gpu_uuid=card.gpu.uuid,
                log_path=Path(folder) / f"{shape}-{context}.log",
            )  # fmt: skip
            server = runtime.start(spec, 120.0)
            try:
                _one_request(server.base_url, task, config.ubatch)
                used = runtime.memory(server)
            finally:
                runtime.stop(server, 10.0)
            arch = GgufModelInspector().inspect(model).architecture
            prediction = estimate_peak(arch, model.stat().st_size, config, Allowances())
            predicted = sum(t.bytes for t in prediction.terms if t.name in MODEL_TERMS)
            peak = used.bytes if used is not None else 0
            ratio = predicted / peak if peak else float("nan")
            ratios.append(ratio)
            rows.append(
                f"| {shape} | {context} | {kv.value} | {'on' if flash else 'off'} | {task.value} "
                f"| {peak / MIB:.0f} | {predicted / MIB:.0f} | {ratio:.3f} "
                f"| {prediction.total_bytes / MIB:.0f} |"
            )
            print(rows[-1], flush=True)
    under = sum(r < 1 for r in ratios)
    lines = [
        f"# Predicted vs NVML peak on {card.gpu.model} ({datetime.now(UTC):%Y-%m-%d}, "
        f"driver {card.driver_version}, {args.server})",
        "",
        "| shape | context | KV | fa | task | NVML peak MiB | predicted MiB | ratio "
        "| admission MiB (with margin) |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"never under: {'met' if under == 0 else f'NOT met ({under} under)'}; "
        f"median {statistics.median(ratios):.3f} (goal <= 1.05); "
        f"worst {max(ratios):.3f} (goal <= 1.15)",
    ]
    print("\n".join(lines[-1:]))
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


def _one_request(base_url: str, task: Task, tokens: int) -> None:
    """One request whose prompt fills a micro-batch, so the compute buffers are used."""
    text = "word " * max(8, tokens - 16)
    with httpx.Client(base_url=base_url, timeout=120, trust_env=False) as http:
        if task is Task.EMBED:
            http.post("/v1/embeddings", json={"input": text}).raise_for_status()
        else:
            http.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": text}], "max_tokens": 4},
            ).raise_for_status()


if __name__ == "__main__":
    sys.exit(main())
