"""A real llama-server split across simulated devices (rpc-servers on 127.0.0.1) on one machine.

Started with a split's command line (``--split-mode layer --tensor-split``, via
``scripts/build-llama-rpc``), each device holds its card's predicted layers, its buffers within
that share's figure (never under, at most +20%), and the ``openai`` client is answered.
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import card_shares
from nodeau.domain.memory import CacheType, RuntimeConfig
from nodeau.ports.runtime import ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.rpc_devices import (
    RpcLlamaServerRuntime,
    device_buffers,
    rpc_build,
    rpc_devices,
)

MODEL_TERMS = ("weights", "kv cache", "compute buffer", "output buffer")  # the rest: runtime
CASES = [  # each card's slots of the 9 (8 layers and the output), context, flash, KV type
    ((5, 4), 4096, False, CacheType.F16),
    ((2, 3, 4), 8192, True, CacheType.F16),
]


@pytest.mark.parametrize(("counts", "context", "flash", "kv"), CASES)
def test_each_device_holds_its_cards_share_and_the_split_model_answers(
    tmp_path: Path, counts: tuple[int, ...], context: int, flash: bool, kv: CacheType
) -> None:
    build = rpc_build()
    model = write_tiny_llama(tmp_path / "split.gguf", n_layers=8, n_embd=1024, n_head=16,
                             n_head_kv=4, n_ff=2816, quant="f16", context=context)  # fmt: skip
    summary = GgufModelInspector().inspect(model)
    assert summary.layers is not None
    config = RuntimeConfig(
        context_tokens=context, flash_attention=flash, cache_type_k=kv, cache_type_v=kv
    )
    shares = card_shares(summary.architecture, summary.layers, config, Allowances(), counts)
    cards = tuple(f"SIM-GPU-{i}" for i in range(len(counts)))
    spec = ServerSpec(
        name="split", model_path=model, config=config, gpu_uuid=cards[0],
        log_path=tmp_path / "split.log", log_buffers=True,
        split=tuple(zip(cards, counts, strict=True)),
    )  # fmt: skip
    with rpc_devices(build, len(counts)) as ports:
        runtime = RpcLlamaServerRuntime(build / "llama-server", ports)
        server = runtime.start(spec, 120.0)
        try:
            assert ("--tensor-split", ",".join(map(str, counts))) in zip(
                server.command, server.command[1:], strict=False
            )
            chat = openai.OpenAI(
                base_url=f"http://127.0.0.1:{server.port}/v1", api_key=server.api_key, timeout=60
            )
            answer = chat.chat.completions.create(
                model="split", messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
            assert answer.choices[0].message.content is not None
        finally:
            runtime.stop(server, grace_s=10)
    reported = device_buffers(spec.log_path.read_text(errors="replace"), ports)
    for share, device in zip(shares, reported, strict=True):
        predicted = sum(t.bytes for t in share.terms if t.name in MODEL_TERMS)
        print(f"card share {predicted} bytes, device {device} bytes: {predicted / device:.3f}")
        assert device <= predicted <= 1.2 * device
