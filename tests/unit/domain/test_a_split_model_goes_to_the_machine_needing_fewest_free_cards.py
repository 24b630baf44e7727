"""Where a model no one card holds is split: only free cards of a machine with a verified
copy, every share within its card, the machine needing the fewest cards (checked against
every eligible machine), the cards in slot order with their counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import split_for
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import Architecture, RuntimeConfig
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.split_placement import SplitAsk, free_cards, place_split
from nodeau.domain.units import GIB, MIB

ARCH = Architecture(
    name="llama", n_layers=8, n_embd=4096, n_head=32, n_head_kv=8, key_length=128,
    value_length=128, n_vocab=32_000, n_ff=14_336, context_length=32_768,
)  # fmt: skip
CONFIG = RuntimeConfig(context_tokens=4096)


def ask(weights: LayerWeights) -> SplitAsk:
    return SplitAsk(arch=ARCH, weights=weights, config=CONFIG, allowances=Allowances())


@st.composite
def fleets(draw: st.DrawFn) -> tuple[Fleet, Ledger, frozenset[str]]:
    machines, held = [], []
    for m in range(draw(st.integers(1, 3))):
        sizes = draw(st.lists(st.sampled_from([24, 48, 80]), min_size=0, max_size=4))
        gpus = tuple(
            Gpu(uuid=f"GPU-{m}-{i}", model=f"{s} GiB card", total_bytes=s * GIB)
            for i, s in enumerate(sizes)
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


layer_sizes = st.integers(1, 30).map(lambda g: g * GIB)


@given(fleets(), layer_sizes, layer_sizes)
def test_a_split_takes_free_cards_of_one_verified_machine_and_the_fewest_there_are(
    fleet_ledger: tuple[Fleet, Ledger, frozenset[str]], layer: int, output: int
) -> None:
    fleet, ledger, verified = fleet_ledger
    weights = LayerWeights(input_bytes=GIB, layer_bytes=(layer,) * 8, output_bytes=output)
    placed = place_split(fleet, ledger, verified, ask(weights))
    needs = {}
    for machine in fleet.machines:
        cards = free_cards(machine.gpus, ledger)
        free = [g.total_bytes for g in cards]
        split = split_for(ARCH, weights, CONFIG, Allowances(), free, min_cards=2)
        if machine.name in verified and split is not None:
            needs[machine.name] = len(split.cards)
    if placed is None:
        assert needs == {}
        return
    machine = fleet.machine(placed.machine)
    assert machine is not None and placed.machine in verified
    assert len(placed.gpu_uuids) == needs[placed.machine] == min(needs.values())
    assert placed.machine == min(n for n, k in needs.items() if k == needs[placed.machine])
    for uuid, share in zip(placed.gpu_uuids, placed.shares, strict=True):
        card = machine.gpu(uuid)
        assert card is not None and ledger.holder(uuid) is None
        assert share.total_bytes <= card.total_bytes
    assert sum(placed.counts) == ARCH.n_layers + 1
    assert placed.tensor_split == ",".join(map(str, placed.counts))


def test_two_80_gib_cards_are_chosen_over_several_of_24() -> None:
    small = Machine(
        name="a-small",
        gpus=tuple(Gpu(uuid=f"GPU-s{i}", model="24 GiB", total_bytes=24 * GIB) for i in range(6)),
    )
    large = Machine(
        name="b-large",
        gpus=tuple(Gpu(uuid=f"GPU-l{i}", model="80 GiB", total_bytes=80 * GIB) for i in range(2)),
    )
    weights = LayerWeights(
        input_bytes=500 * MIB, layer_bytes=(10 * GIB,) * 8, output_bytes=500 * MIB
    )  # fmt: skip
    fleet = Fleet(machines=(small, large))
    placed = place_split(fleet, Ledger(), frozenset({"a-small", "b-large"}), ask(weights))
    assert placed is not None
    assert (placed.machine, placed.gpu_uuids) == ("b-large", ("GPU-l0", "GPU-l1"))
    # without a verified copy there, the small cards take it
    placed = place_split(fleet, Ledger(), frozenset({"a-small"}), ask(weights))
    assert placed is not None and placed.machine == "a-small" and len(placed.gpu_uuids) > 2
