"""A model shape and fleets for the split's tests: a model of about 21 GiB that no 16 GiB card
holds and two do, machines of 16 GiB cards, and generated fleets of a few cards of common
sizes, some of them held, with the machines that hold a verified copy."""

from __future__ import annotations

from attrs import evolve
from hypothesis import strategies as st

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import Architecture, MeasuredTable, RuntimeConfig, predictor
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import FleetView
from nodeau.domain.split_placement import SplitAsk
from nodeau.domain.units import GIB

ARCH = Architecture(
    name="llama", n_layers=8, n_embd=4096, n_head=32, n_head_kv=8, key_length=128,
    value_length=128, n_vocab=32_000, n_ff=14_336, context_length=32_768,
)  # fmt: skip
CONFIG = RuntimeConfig(context_tokens=4096)
REQUEST = AdmissionRequest(workload="big", model="big", artifact_id="ab" * 32, config=CONFIG)
# about 21 GiB in all: no 16 GiB card holds it, two do
WEIGHTS = LayerWeights(input_bytes=GIB, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)


def ask(weights: LayerWeights) -> SplitAsk:
    """The split of ``ARCH`` with ``weights`` at ``CONFIG``, with the default allowances."""
    return SplitAsk(arch=ARCH, weights=weights, config=CONFIG, allowances=Allowances())


def sixteens(name: str, cards: int) -> Machine:
    """Machine ``name`` with ``cards`` cards of 16 GiB (``GPU-{name}{i}``)."""
    return Machine(
        name=name,
        gpus=tuple(
            Gpu(uuid=f"GPU-{name}{i}", model="16 GiB", total_bytes=16 * GIB) for i in range(cards)
        ),
    )


def one_machine(**changes: object) -> FleetView:
    """m1's three 16 GiB cards, free, and ``REQUEST`` of 18 GiB no one of them holds, two do
    (split as ``WEIGHTS``), under an Enterprise plan; ``changes``: to the view."""
    gpus = tuple(Gpu(uuid=f"GPU-{i}", model="16 GiB", total_bytes=16 * GIB) for i in range(3))
    predict = predictor(
        arch=ARCH, artifact_id=REQUEST.artifact_id, artifact_bytes=18 * GIB, config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip
    view = FleetView(
        fleet=Fleet(machines=(Machine(name="m1", gpus=gpus),)), ledger=Ledger(),
        settings=SchedulingSettings(), excluded=(), verified_on=frozenset({"m1"}),
        predict=predict, plan=ENTERPRISE, split=ask(WEIGHTS),
    )  # fmt: skip
    return evolve(view, **changes)


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
