"""Benchmark: each card's predicted share of a split model against what llama.cpp puts on
each device, with several cards simulated on the CPU by llama.cpp's RPC backend.

    python bench/split_memory.py --server PATH --rpc-server PATH [--out table.md]

Needs a llama-server and an rpc-server built with ``-DGGML_RPC=ON`` (the product's builds
leave RPC out: an rpc-server answers anyone who reaches its port; here each listens on
127.0.0.1 for the run alone), from the sources `nodeau server install` unpacked:

    cmake -S ~/.cache/nodeau/llama-server/0.3.36/src/vendor/llama.cpp -B /tmp/rpcbuild \
      -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_RPC=ON
    cmake --build /tmp/rpcbuild --target llama-server ggml-rpc-server -j 2

 Each rpc-server is one device: llama-server is started with the
product's command line plus ``--rpc`` and ``--split-mode layer --tensor-split`` of the whole
slot counts ``domain/card_shares`` chose, and reports its buffers per device at load. Each
card's predicted share (weights, KV cache, compute, output; the runtime allowance and margin
apart) is set against that device's buffers. The goals of a card's share: never under,
at most +20%.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.llama_server import free_port, server_command
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import card_shares
from nodeau.domain.memory import MIB, CacheType, RuntimeConfig
from nodeau.ports.runtime import ServerSpec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.builders.tiny_gguf import write_tiny_llama  # noqa: E402
from tests.support.real.kubelet import ended  # noqa: E402

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
_DEVICE = re.compile(
    r"(?P<device>RPC\d*\[[^\]]+\]|CPU\S*)\s+(?P<kind>model|KV|compute|output) buffer size =\s*"
    r"(?P<mib>[\d.]+) MiB"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, required=True, help="llama-server with RPC")
    parser.add_argument("--rpc-server", type=Path, required=True, help="its rpc-server")
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
    """Start one rpc-server per card and llama-server across them until it is ready; each
    device's reported buffers (model + KV + compute + output) in bytes, in slot order."""
    with ExitStack() as stack:
        ports = [free_port() for _ in counts]
        for port in ports:
            rpc = subprocess.Popen(
                [str(args.rpc_server), "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            stack.callback(ended, rpc, 10.0)
        time.sleep(1.0)
        spec = ServerSpec(
            name="split", model_path=model, config=config, gpu_uuid="rpc", log_path=log,
            log_buffers=True,
        )  # fmt: skip
        port = free_port()
        command = [
            *server_command(args.server, spec, port),
            "--rpc", ",".join(f"127.0.0.1:{p}" for p in ports),
            "--split-mode", "layer",
            "--tensor-split", ",".join(str(c) for c in counts),
        ]  # fmt: skip
        with log.open("wb") as out:
            server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        stack.callback(ended, server, 10.0)
        _ready(server, port, log)
    by_device: dict[str, int] = {}
    for found in _DEVICE.finditer(log.read_text(errors="replace")):
        if found["device"].startswith("RPC"):
            size = round(float(found["mib"]) * MIB)
            by_device[found["device"]] = by_device.get(found["device"], 0) + size
    devices = sorted(by_device, key=lambda d: ports.index(int(d.rsplit(":", 1)[1][:-1])))
    if len(devices) != len(counts):
        raise SystemExit(f"{len(devices)} devices reported buffers, {len(counts)} expected: {log}")
    return [by_device[d] for d in devices]


def _ready(server: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 120
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"llama-server exited while loading: {log}")
            try:
                if http.get("/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    raise SystemExit(f"llama-server was not ready in 120 s: {log}")


if __name__ == "__main__":
    sys.exit(main())
