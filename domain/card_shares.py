"""Each card's predicted share of a model split across cards: its layers' weights and KV
cache, a compute buffer, the output layer and logits on the last card, the runtime allowance
and the margin on every card; and the fewest cards whose every share fits.

Why it is so: docs/adr/0031-one-workload-across-cards.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights, Split, fewest_cards
from nodeau.domain.memory import (
    F32_BYTES,
    Architecture,
    Prediction,
    RuntimeConfig,
    Source,
    Term,
    compute_buffer_bytes,
    effective_ubatch,
    kv_cache_bytes,
    margin_bytes,
    mask_bytes,
    output_buffer_bytes,
    with_allowances,
)


def layer_kv_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """One layer's KV cache, as a layer that keeps the whole context: which layers keep only
    a window is not known by position, so every layer is counted as the larger kind."""
    return kv_cache_bytes(attrs.evolve(arch, n_layers=1, swa_layers=0), config)


def slot_costs(arch: Architecture, weights: LayerWeights, config: RuntimeConfig) -> tuple[int, ...]:
    """What each slot brings to the card it goes to: a layer its weights and its KV cache,
    the output layer its weights and the output buffer."""
    if len(weights.layer_bytes) != arch.n_layers:
        raise ValueError(f"{len(weights.layer_bytes)} layers weighed, {arch.n_layers} declared")
    kv = layer_kv_bytes(arch, config)
    output = weights.output_bytes + output_buffer_bytes(arch, config)
    return (*(layer + kv for layer in weights.layer_bytes), output)


# llama.cpp's GGML_SCHED_MAX_COPIES: split across devices, its pipeline keeps this many
# copies of each device's inputs (the attention masks, the incoming activations)
PIPELINE_COPIES = 4


def pipeline_bytes(arch: Architecture, config: RuntimeConfig) -> int:
    """What a card's compute buffer gains when the model is split (pipeline parallelism):
    the further copies of the masks, and a copy of the micro-batch's activations each."""
    activations = effective_ubatch(config) * arch.n_embd * F32_BYTES
    return (PIPELINE_COPIES - 1) * mask_bytes(arch, config) + PIPELINE_COPIES * activations


def split_compute_bytes(arch: Architecture, config: RuntimeConfig, cards: int) -> int:
    """A card's compute buffer when the model takes ``cards`` cards."""
    extra = pipeline_bytes(arch, config) if cards > 1 else 0
    return compute_buffer_bytes(arch, config) + extra


def card_bytes(
    arch: Architecture, config: RuntimeConfig, allowances: Allowances, cards: int
) -> int:
    """What every card holds whatever its layers: a compute buffer and the runtime."""
    return split_compute_bytes(arch, config, cards) + allowances.runtime_footprint_bytes


def room(free: int, allowances: Allowances) -> int:
    """The most a card with ``free`` bytes takes before its margin (-1: not even the margin
    fits): the margin grows with what it covers, so the largest subtotal that fits with it."""
    subtotal = free - allowances.margin_floor_bytes
    if subtotal < 0:
        return -1
    if subtotal + margin_bytes(subtotal, allowances) <= free:
        return subtotal
    subtotal = free * 100 // (100 + allowances.margin_percent)
    while subtotal + margin_bytes(subtotal, allowances) > free:
        subtotal -= 1
    return subtotal


def split_for(
    arch: Architecture,
    weights: LayerWeights,
    config: RuntimeConfig,
    allowances: Allowances,
    free: Sequence[int],
    min_cards: int = 1,
) -> Split | None:
    """The fewest of the cards with ``free`` bytes (in the placement policy's order) whose
    every share fits with its margin, at least ``min_cards``; None when no set of them does.
    One card is asked first (when one may do), without the pipeline's copies a split adds
    to every card."""
    costs = slot_costs(arch, weights, config)
    rooms = [room(f, allowances) for f in free]
    if min_cards <= 1:
        alone = fewest_cards(costs, card_bytes(arch, config, allowances, 1), rooms)
        if alone is not None and len(alone.cards) == 1:
            return alone
    return fewest_cards(costs, card_bytes(arch, config, allowances, 2), rooms, max(min_cards, 1))


def card_shares(
    arch: Architecture,
    weights: LayerWeights,
    config: RuntimeConfig,
    allowances: Allowances,
    counts: Sequence[int],
) -> tuple[Prediction, ...]:
    """Each card's predicted share for whole slot counts in order, every term estimated."""
    if sum(counts) != arch.n_layers + 1 or min(counts, default=0) <= 0:
        raise ValueError(f"slot counts {list(counts)} do not share {arch.n_layers + 1} slots")
    est = Source.ESTIMATED
    kv = layer_kv_bytes(arch, config)
    shares, start = [], 0
    for at, count in enumerate(counts):
        end = start + count
        layers = min(end, arch.n_layers) - start
        last = at == len(counts) - 1
        terms = [
            Term(
                name="weights",
                bytes=sum(weights.slot_bytes[start:end]),
                source=est,
                basis=_slots(start, end, arch.n_layers),
            ),
            Term(name="kv cache", bytes=layers * kv, source=est, basis=f"{layers} layers"),
            Term(
                name="compute buffer",
                bytes=split_compute_bytes(arch, config, len(counts)),
                source=est,
                basis="one on every card"
                + (", with the pipeline's copies" if len(counts) > 1 else ""),
            ),
            Term(
                name="output buffer",
                bytes=output_buffer_bytes(arch, config) if last else 0,
                source=est,
                basis="on the last card" if last else "on the last card, not this one",
            ),
        ]
        shares.append(with_allowances(terms, allowances, "runtime allowance, every card"))
        start = end
    return tuple(shares)


def _slots(start: int, end: int, n_layers: int) -> str:
    layers = min(end, n_layers) - start
    said = f"layers {start}-{start + layers - 1}" if layers else "no layer"
    return said + (" and the output layer" if end > n_layers else "")
