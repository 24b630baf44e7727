"""One layer's KV cache on the card that holds it: a layer's share of the whole model's
cache, and for a model with sliding-window layers the larger, whole-context kind (which
layers slide is not known by position)."""

from __future__ import annotations

from attrs import evolve

from nodeau.domain.card_shares import layer_kv_bytes
from nodeau.domain.memory import RuntimeConfig, kv_cache_bytes
from tests.support.builders.split_fleets import ARCH

CONFIG = RuntimeConfig(context_tokens=8192)


def test_every_layer_of_a_model_without_sliding_windows_caches_its_share() -> None:
    assert layer_kv_bytes(ARCH, CONFIG) * ARCH.n_layers == kv_cache_bytes(ARCH, CONFIG)


def test_a_sliding_window_model_counts_each_layer_as_a_whole_context_layer() -> None:
    sliding = evolve(ARCH, sliding_window=1024, swa_layers=6)
    whole = kv_cache_bytes(ARCH, CONFIG) // ARCH.n_layers
    assert layer_kv_bytes(sliding, CONFIG) == whole
    assert kv_cache_bytes(sliding, CONFIG) < whole * ARCH.n_layers
    one_slides = evolve(ARCH, sliding_window=1024, swa_layers=1)
    assert layer_kv_bytes(one_slides, CONFIG) == whole
