"""A GGUF summary's weights by layer: the input layer, each repeating layer, the output
layer, as llama.cpp's layer split places them; checked against the ``gguf`` reader's own
tensor sizes, on untied, tied and mixture-of-experts files."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader

from nodeau.adapters.gguf_inspector import GgufModelInspector
from tests.support.builders.tiny_gguf import write_tiny_gemma3, write_tiny_llama


def _sizes(path: Path) -> dict[str, int]:
    return {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}


@pytest.mark.parametrize("quant", ["f32", "f16", "q8_0"])
def test_every_tensor_is_counted_once_in_the_layer_that_holds_it(
    tmp_path: Path, quant: str
) -> None:
    path = write_tiny_llama(tmp_path / "m.gguf", n_layers=3, n_embd=64, n_ff=128, quant=quant)
    sizes = _sizes(path)
    summary = GgufModelInspector().inspect(path)
    layers = summary.layers
    assert layers is not None
    assert layers.input_bytes == sizes["token_embd.weight"]
    assert layers.layer_bytes == tuple(
        sum(v for k, v in sizes.items() if k.startswith(f"blk.{i}.")) for i in range(3)
    )
    assert layers.output_bytes == sizes["output.weight"] + sizes["output_norm.weight"]
    assert layers.input_bytes + sum(layers.layer_bytes) + layers.output_bytes == (
        summary.tensor_bytes
    )
    assert layers.slot_bytes == (*layers.layer_bytes, layers.output_bytes)


def test_a_tied_output_layer_takes_a_copy_of_the_embeddings(tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tied.gguf", n_layers=2, tied=True)
    sizes = _sizes(path)
    assert "output.weight" not in sizes
    layers = GgufModelInspector().inspect(path).layers
    assert layers is not None
    assert layers.output_bytes == sizes["output_norm.weight"] + sizes["token_embd.weight"]
    assert layers.input_bytes == sizes["token_embd.weight"]


def test_experts_weigh_on_their_own_layer(tmp_path: Path) -> None:
    dense = write_tiny_llama(tmp_path / "dense.gguf", n_layers=2, n_ff=64)
    moe = write_tiny_llama(tmp_path / "moe.gguf", n_layers=2, n_ff=64, n_expert=4,
                           n_expert_used=2)  # fmt: skip
    dense_layers = GgufModelInspector().inspect(dense).layers
    moe_layers = GgufModelInspector().inspect(moe).layers
    assert dense_layers is not None and moe_layers is not None
    experts = sum(v for k, v in _sizes(moe).items() if k.startswith("blk.0.ffn_") and "exps" in k)
    assert moe_layers.layer_bytes[0] > experts > dense_layers.layer_bytes[0]
    assert moe_layers.output_bytes == dense_layers.output_bytes


def test_a_sliding_window_gemma3_ties_its_output_and_windows_five_layers_of_six(
    tmp_path: Path,
) -> None:
    path = write_tiny_gemma3(tmp_path / "g3.gguf", n_layers=12, sliding_window=256)
    sizes = _sizes(path)
    summary = GgufModelInspector().inspect(path)
    assert (summary.architecture.name, summary.architecture.sliding_window) == ("gemma3", 256)
    assert summary.architecture.swa_layers == 10
    layers = summary.layers
    assert layers is not None and len(layers.layer_bytes) == 12
    assert layers.output_bytes == sizes["output_norm.weight"] + sizes["token_embd.weight"]
