"""Benchmark: each card's predicted share of a split model against llama.cpp's per-device buffers.

Usage: python bench/split_memory.py --build "$(scripts/build-llama-rpc PATH/TO/llama-server)"
Cards are simulated on the CPU by llama.cpp's RPC backend, one rpc-server each. Goals of a card's
share: never under, at most +20% (method: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import card_shares
from nodeau.domain.memory import MIB, CacheType, RuntimeConfig
from nodeau.ports.runtime import ServerSpec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.builders.tiny_gguf import write_tiny_llama  # noqa: E402
from tests.support.real.rpc_devices import (  # noqa: E402
    RpcLlamaServerRuntime,
    device_buffers,
    rpc_devices,
)

MODEL = {"n_layers": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 4, "n_ff": 2816,
         "quant": "f16"}  # fmt: skip
# (counts of the 9 slots per card, context, flash attention, KV type)
CASES = [
    ((5, 4), 4096, False, CacheType.F16),
    ((5, 4), 32768, True, CacheType.F16),
    ((3, 3, 3), 8192, False, CacheType.F16),
    ((2, 3, 4), 16384, True, CacheType.Q8_0),
]
MODEL_TERMS = ("weights", "kv cache", "compute buffer", "output buffer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, required=True,
                        help="the bin folder scripts/build-llama-rpc printed")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    lines = [
        "| cards | context | fa | KV | card | slots | reported MiB | predicted MiB | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        model = write_tiny_llama(Path(folder) / "split.gguf", context=32768, **MODEL)  # type: ignore[arg-type]
        summary = GgufModelInspector().inspect(model)
        assert summary.layers is not None
        for counts, context, flash, kv in CASES:
            config = RuntimeConfig(
                context_tokens=context, flash_attention=flash, cache_type_k=kv, cache_type_v=kv
            )
            shares = card_shares(summary.architecture, summary.layers, config, Allowances(), counts)
            log = Path(folder) / f"{len(counts)}-{context}.log"
            reported = _served(args, model, config, counts, log)
            for at, (share, count) in enumerate(zip(shares, counts, strict=True)):
                predicted = sum(t.bytes for t in share.terms if t.name in MODEL_TERMS)
                device = reported[at]
                ratio = predicted / device
                ratios.append(ratio)
                lines.append(
                    f"| {len(counts)} | {context} | {'on' if flash else 'off'} | {kv.value} "
                    f"| {at} | {count} | {device / MIB:.2f} | {predicted / MIB:.2f} "
                    f"| {ratio:.3f} |"
                )
                print(lines[-1], flush=True)
    under = sum(r < 1 for r in ratios)
    lines += [
        "",
        f"never under: {'met' if under == 0 else f'NOT met ({under} under)'}; "
        f"worst {max(ratios):.3f} (goal <= 1.20); {len(ratios)} cards",
    ]
    print(lines[-1])
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


def _served(
    args: argparse.Namespace, model: Path, config: RuntimeConfig, counts: tuple[int, ...], log: Path
) -> list[int]:
    """One rpc-server per card and the product's llama-server runtime across them, started
    with a split's server spec until it is ready; each device's reported buffers (model, KV,
    compute, output) in bytes, in slot order."""
    cards = tuple(f"RPC-{i}" for i in range(len(counts)))
    spec = ServerSpec(
        name="split", model_path=model, config=config, gpu_uuid=cards[0], log_path=log,
        log_buffers=True, split=tuple(zip(cards, counts, strict=True)),
    )  # fmt: skip
    with rpc_devices(args.build, len(counts)) as ports:
        runtime = RpcLlamaServerRuntime(args.build / "llama-server", ports)
        server = runtime.start(spec, 120.0)
        runtime.stop(server, grace_s=10)
    return device_buffers(log.read_text(errors="replace"), ports)


if __name__ == "__main__":
    sys.exit(main())
