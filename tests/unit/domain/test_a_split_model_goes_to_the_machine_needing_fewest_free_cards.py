"""Where a model no one card holds is split: only free cards of a machine with a verified
copy, every share within its card, the machine needing the fewest cards (checked against
every eligible machine) and among those the one its policy ranks first, the cards in slot
order with their counts."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_shares import split_for
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.placement import Policy, SchedulingSettings
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.split_placement import free_cards, place_split
from nodeau.domain.units import GIB, MIB
from tests.support.builders.split_fleets import ARCH, CONFIG, ask, fleets

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
    tied = [n for n, k in needs.items() if k == needs[placed.machine]]

    def fullness(name: str) -> Fraction:
        found = fleet.machine(name)
        assert found is not None
        return Fraction(len(ledger.on_machine(name)), len(found.gpus))

    # pack, the default policy: the fullest of them, then the first by name
    assert placed.machine == min(tied, key=lambda n: (-fullness(n), n))
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


def test_among_machines_needing_as_few_cards_pack_and_spread_choose_as_for_one_card() -> None:
    gpus = {n: tuple(Gpu(uuid=f"GPU-{n}{i}", model="48 GiB", total_bytes=48 * GIB)
                     for i in range(4)) for n in ("a", "b")}  # fmt: skip
    fleet = Fleet(machines=tuple(Machine(name=n, gpus=g) for n, g in gpus.items()))
    held = Ledger(reservations=(
        Reservation(workload="w", machine="b", gpu_uuid="GPU-b3", bytes=GIB),
    ))  # fmt: skip
    weights = LayerWeights(input_bytes=GIB, layer_bytes=(10 * GIB,) * 8, output_bytes=GIB)
    both = frozenset({"a", "b"})
    packed = place_split(fleet, held, both, ask(weights))
    spread = place_split(fleet, held, both, ask(weights),
                         SchedulingSettings(fleet_policy=Policy.SPREAD))  # fmt: skip
    assert packed is not None and spread is not None
    assert (packed.machine, spread.machine) == ("b", "a")
    assert len(packed.gpu_uuids) == len(spread.gpu_uuids) == 2
