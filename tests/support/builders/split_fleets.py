"""A model shape and generated fleets for the split's tests: machines of a few cards of
common sizes, some of them held, and the machines that hold a verified copy."""

from __future__ import annotations

from hypothesis import strategies as st

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import Architecture, RuntimeConfig
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.split_placement import SplitAsk
from nodeau.domain.units import GIB

ARCH = Architecture(
    name="llama", n_layers=8, n_embd=4096, n_head=32, n_head_kv=8, key_length=128,
    value_length=128, n_vocab=32_000, n_ff=14_336, context_length=32_768,
)  # fmt: skip
CONFIG = RuntimeConfig(context_tokens=4096)


def ask(weights: LayerWeights) -> SplitAsk:
    """The split of ``ARCH`` with ``weights`` at ``CONFIG``, with the default allowances."""
    return SplitAsk(arch=ARCH, weights=weights, config=CONFIG, allowances=Allowances())


@st.composite
def fleets(
    draw: st.DrawFn, sizes: tuple[int, ...] = (24, 48, 80), min_cards: int = 0
) -> tuple[Fleet, Ledger, frozenset[str]]:
    """One to three machines of ``min_cards`` to four cards of ``sizes`` GiB, each card held
    or not, and the machines holding a verified copy."""
    machines, held = [], []
    for m in range(draw(st.integers(1, 3))):
        picked = draw(st.lists(st.sampled_from(sizes), min_size=min_cards, max_size=4))
        gpus = tuple(
            Gpu(uuid=f"GPU-{m}-{i}", model=f"{s} GiB card", total_bytes=s * GIB)
            for i, s in enumerate(picked)
        )
        machines.append(Machine(name=f"m{m}", gpus=gpus))
        held += [(f"m{m}", g) for g in gpus if draw(st.booleans())]
    ledger = Ledger(
        reservations=tuple(
            Reservation(workload=f"w-{g.uuid}", machine=machine, gpu_uuid=g.uuid, bytes=GIB)
            for machine, g in held
        )
    )
    verified = frozenset(m.name for m in machines if draw(st.booleans()))
    return Fleet(machines=tuple(machines)), ledger, verified
