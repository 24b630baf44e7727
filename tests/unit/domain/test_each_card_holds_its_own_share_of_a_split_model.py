"""Each card's share of a model split across cards: its layers' weights and KV cache, a
compute buffer and the runtime on every card, the output on the last, a margin each; the
cards chosen are the fewest whose every share fits, and one whenever one does."""

from __future__ import annotations

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import (
    card_shares,
    layer_kv_bytes,
    pipeline_bytes,
    room,
    split_compute_bytes,
    split_for,
)
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.memory import Architecture, RuntimeConfig, margin_bytes
from nodeau.domain.units import GIB, MIB


def llama(n_layers: int) -> Architecture:
    return Architecture(
        name="llama", n_layers=n_layers, n_embd=4096, n_head=32, n_head_kv=8, key_length=128,
        value_length=128, n_vocab=32_000, n_ff=14_336, context_length=32_768,
    )  # fmt: skip


CONFIG = RuntimeConfig(context_tokens=8192)
allowances = st.builds(
    Allowances,
    runtime_footprint_bytes=st.integers(0, 1024).map(lambda m: m * MIB),
    margin_percent=st.integers(0, 30),
    margin_floor_bytes=st.integers(0, 512).map(lambda m: m * MIB),
)


@st.composite
def models(draw: st.DrawFn) -> tuple[Architecture, LayerWeights]:
    n_layers = draw(st.integers(1, 8))
    layer = st.integers(1, 20 * 1024).map(lambda m: m * MIB)
    weights = LayerWeights(
        input_bytes=draw(st.integers(0, 1024)) * MIB,
        layer_bytes=tuple(draw(st.lists(layer, min_size=n_layers, max_size=n_layers))),
        output_bytes=draw(layer),
    )
    return llama(n_layers), weights


frees = st.lists(st.integers(0, 96).map(lambda g: g * GIB), min_size=1, max_size=4)


@given(models(), allowances, frees)
def test_every_chosen_card_holds_its_whole_share_with_its_margin(
    model: tuple[Architecture, LayerWeights], allowance: Allowances, free: list[int]
) -> None:
    arch, weights = model
    split = split_for(arch, weights, CONFIG, allowance, free)
    if split is None:
        return
    shares = card_shares(arch, weights, CONFIG, allowance, split.counts)
    assert len(set(split.cards)) == len(split.cards)
    for card, share, subtotal in zip(split.cards, shares, split.shares, strict=True):
        assert share.total_bytes <= free[card]
        margin = next(t.bytes for t in share.terms if t.name == "margin")
        assert share.total_bytes - margin == subtotal
    assert sum(t.bytes for s in shares for t in s.terms if t.name == "weights") == sum(
        weights.slot_bytes
    )
    kv = sum(t.bytes for s in shares for t in s.terms if t.name == "kv cache")
    assert kv == arch.n_layers * layer_kv_bytes(arch, CONFIG)
    outputs = [t.bytes for s in shares for t in s.terms if t.name == "output buffer"]
    assert all(b == 0 for b in outputs[:-1]) and outputs[-1] > 0


@given(models(), allowances, frees)
def test_one_card_is_chosen_whenever_one_holds_the_whole_model(
    model: tuple[Architecture, LayerWeights], allowance: Allowances, free: list[int]
) -> None:
    arch, weights = model
    [alone] = card_shares(arch, weights, CONFIG, allowance, [arch.n_layers + 1])
    split = split_for(arch, weights, CONFIG, allowance, free)
    if any(alone.total_bytes <= f for f in free):
        assert split is not None and len(split.cards) == 1
        assert free[split.cards[0]] >= alone.total_bytes
    else:
        assert split is None or len(split.cards) > 1


@given(st.integers(0, 200 * GIB), allowances)
def test_room_is_the_most_a_card_takes_before_its_margin(free: int, allowance: Allowances) -> None:
    def total(subtotal: int) -> int:
        return subtotal + margin_bytes(subtotal, allowance)

    most = room(free, allowance)
    if most < 0:
        assert free < allowance.margin_floor_bytes
    else:
        assert total(most) <= free < total(most + 1)


def test_a_70b_model_at_f16_takes_two_80_gib_cards_and_says_which_layers_each_holds() -> None:
    arch = llama(80)
    weights = LayerWeights(
        input_bytes=1000 * MIB, layer_bytes=(1700 * MIB,) * 80, output_bytes=1000 * MIB
    )
    split = split_for(arch, weights, CONFIG, Allowances(), [80 * GIB, 24 * GIB, 80 * GIB])
    assert split is not None
    assert split.cards == (0, 2)  # the 24 GiB card is too small to be one of two
    shares = card_shares(arch, weights, CONFIG, Allowances(), split.counts)
    bases = [next(t.basis for t in s.terms if t.name == "weights") for s in shares]
    assert bases[0].startswith("layers 0-") and not bases[0].endswith("output layer")
    assert bases[1].endswith("-79 and the output layer")


def test_slot_counts_that_do_not_share_every_slot_are_a_mistake() -> None:
    weights = LayerWeights(input_bytes=0, layer_bytes=(MIB,) * 4, output_bytes=MIB)
    with pytest.raises(ValueError, match="do not share 5 slots"):
        card_shares(llama(4), weights, CONFIG, Allowances(), [2, 2])
    with pytest.raises(ValueError, match="do not share 5 slots"):
        card_shares(llama(4), weights, CONFIG, Allowances(), [5, 0])
    with pytest.raises(ValueError, match="3 layers weighed, 4 declared"):
        split_for(llama(4), LayerWeights(input_bytes=0, layer_bytes=(MIB,) * 3,
                  output_bytes=MIB), CONFIG, Allowances(), [GIB])  # fmt: skip


def test_a_split_cards_compute_buffer_counts_the_pipelines_copies() -> None:
    """Measured with llama.cpp's RPC backend (bench/split_memory.py): the bench's model at
    4,096 tokens made a 145.01 MiB compute buffer on one device and 180.02 on each of two;
    at 32,768 with flash attention, 54.51 and 158.54."""
    arch = Architecture(
        name="llama", n_layers=8, n_embd=1024, n_head=16, n_head_kv=4, key_length=64,
        value_length=64, n_vocab=355, n_ff=2816, context_length=32_768,
    )  # fmt: skip
    for config, one, each in (
        (RuntimeConfig(context_tokens=4096), 145.01, 180.02),
        (RuntimeConfig(context_tokens=32_768, flash_attention=True), 54.51, 158.54),
    ):
        alone = split_compute_bytes(arch, config, 1)
        split = split_compute_bytes(arch, config, 2)
        assert one * MIB <= alone <= 1.1 * one * MIB
        assert each * MIB <= split <= 1.1 * each * MIB
        assert split - alone == pipeline_bytes(arch, config)


def test_each_cards_terms_say_what_they_count_on_that_card() -> None:
    weights = LayerWeights(input_bytes=MIB, layer_bytes=(64 * MIB,) * 4, output_bytes=32 * MIB)
    first, last = card_shares(llama(4), weights, CONFIG, Allowances(), [2, 3])
    said = {"first": [(t.name, t.basis) for t in first.terms],
            "last": [(t.name, t.basis) for t in last.terms]}  # fmt: skip
    copies = "one on every card, with the pipeline's copies"
    assert said["first"][:5] == [
        ("weights", "layers 0-1"),
        ("kv cache", "2 layers"),
        ("compute buffer", copies),
        ("output buffer", "on the last card, not this one"),
        ("runtime footprint", "runtime allowance, every card"),
    ]
    assert said["last"][:5] == [
        ("weights", "layers 2-3 and the output layer"),
        ("kv cache", "2 layers"),
        ("compute buffer", copies),
        ("output buffer", "on the last card"),
        ("runtime footprint", "runtime allowance, every card"),
    ]
    assert next(t.bytes for t in first.terms if t.name == "output buffer") == 0
    assert next(t.bytes for t in last.terms if t.name == "output buffer") > 0
    (alone,) = card_shares(llama(4), weights, CONFIG, Allowances(), [5])
    assert ("compute buffer", "one on every card") in [(t.name, t.basis) for t in alone.terms]
    assert ("weights", "layers 0-3 and the output layer") in [
        (t.name, t.basis) for t in alone.terms
    ]
    (_, only_output) = card_shares(llama(4), weights, CONFIG, Allowances(), [4, 1])
    assert only_output.terms[0].basis == "no layer and the output layer"
    assert only_output.terms[1] == evolve(only_output.terms[1], bytes=0, basis="0 layers")
