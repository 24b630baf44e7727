"""Where a model that no one card holds is split: among the machines holding a verified copy,
the one whose fewest free cards hold every share, and those cards in slot order (the order
``CUDA_VISIBLE_DEVICES`` lists them and ``--tensor-split`` counts their slots).

Why it is so: docs/adr/0031-one-workload-across-cards.md.
"""

from __future__ import annotations

from fractions import Fraction

from attrs import frozen

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import card_shares, split_for
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu
from nodeau.domain.memory import Architecture, Prediction, RuntimeConfig
from nodeau.domain.placement import SchedulingSettings, machine_score
from nodeau.domain.reservations import Ledger


@frozen(kw_only=True)
class SplitAsk:
    """What a split of one model is worked out from: its shape, where its weights lie, the
    configuration asked and the allowances every card keeps."""

    arch: Architecture
    weights: LayerWeights
    config: RuntimeConfig
    allowances: Allowances


@frozen(kw_only=True)
class SplitPlacement:
    """The machine, its cards in slot order, each card's slot count and predicted share."""

    machine: str
    gpu_uuids: tuple[str, ...]
    counts: tuple[int, ...]
    shares: tuple[Prediction, ...]

    @property
    def tensor_split(self) -> str:
        """llama-server's ``--tensor-split``: whole slot counts, in the cards' order."""
        return ",".join(str(c) for c in self.counts)


def free_cards(machine_gpus: tuple[Gpu, ...], ledger: Ledger) -> tuple[Gpu, ...]:
    """The cards no workload holds, smallest first (as one card is placed: the smallest
    that takes it), then by UUID."""
    unheld = (g for g in machine_gpus if ledger.holder(g.uuid) is None)
    return tuple(sorted(unheld, key=lambda g: (g.total_bytes, g.uuid)))


def place_split(
    fleet: Fleet,
    ledger: Ledger,
    verified_on: frozenset[str],
    ask: SplitAsk,
    settings: SchedulingSettings | None = None,
) -> SplitPlacement | None:
    """The fewest free cards, two or more, of one machine with a verified copy that hold
    every share with its margin; among machines needing as few, the one each machine's
    placement policy ranks first (pack: the fullest, spread: the emptiest, as one card is
    placed), then the first by name. None: no machine can. (Whether one card takes the
    model is the whole model's prediction's to say, which also counts the input layer that
    a split keeps in host memory.)"""
    settings = settings or SchedulingSettings()
    arch, weights, config, allowances = ask.arch, ask.weights, ask.config, ask.allowances
    best: tuple[tuple[int, Fraction, str], tuple[Gpu, ...], tuple[int, ...]] | None = None
    for machine in fleet.machines:
        if machine.name not in verified_on:
            continue
        cards = free_cards(machine.gpus, ledger)
        free = [g.total_bytes for g in cards]
        split = split_for(arch, weights, config, allowances, free, min_cards=2)
        if split is None:
            continue
        held = len(ledger.on_machine(machine.name))
        score = machine_score(settings.policy_for(machine.name), held, len(machine.gpus))
        key = (len(split.cards), -score, machine.name)
        if best is None or key < best[0]:
            best = (key, tuple(cards[i] for i in split.cards), split.counts)
    if best is None:
        return None
    (_, _, name), chosen, counts = best
    return SplitPlacement(
        machine=name,
        gpu_uuids=tuple(g.uuid for g in chosen),
        counts=counts,
        shares=card_shares(arch, weights, config, allowances, counts),
    )
