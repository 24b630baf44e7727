"""Builders of the domain's hardware for tests: cards, machines, fleets, flat predictions.

``gpu``, ``machine`` and ``fleet`` build the values in one call each; ``flat`` predicts the
same peak on every card model; ``request`` is an admission request for "qwen";
``fleets`` draws random fleets for Hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import GIB, Prediction, RuntimeConfig, Source, Term


def gpu(uuid: str, gib: int = 24, model: str = "NVIDIA L4") -> Gpu:
    return Gpu(uuid=uuid, model=model, total_bytes=gib * GIB)


def machine(name: str, *cards: Gpu, control_plane: bool = False) -> Machine:
    return Machine(name=name, gpus=cards, control_plane=control_plane)


def fleet(*machines: Machine) -> Fleet:
    return Fleet(machines=machines)


def flat(total: int, source: Source = Source.ESTIMATED) -> Callable[[str], Prediction]:
    """A predictor giving the same one-term prediction for every GPU model."""
    prediction = Prediction(
        terms=(Term(name="peak", bytes=total, source=source, basis="test"),), source=source
    )
    return lambda _model: prediction


def request(workload: str = "svc", model: str = "qwen") -> AdmissionRequest:
    return AdmissionRequest(
        workload=workload,
        model=model,
        artifact_id="a" * 64,
        config=RuntimeConfig(context_tokens=4096),
    )


@st.composite
def fleets(draw: st.DrawFn, max_machines: int = 4, max_cards: int = 4) -> Fleet:
    """Random fleets with unique machine names and GPU UUIDs."""
    n = draw(st.integers(1, max_machines))
    machines = []
    for i in range(n):
        cards = draw(st.lists(st.sampled_from([8, 16, 24, 48, 80]), min_size=0, max_size=max_cards))
        machines.append(
            machine(f"m{i}", *(gpu(f"GPU-{i}-{j}", size) for j, size in enumerate(cards)))
        )
    return fleet(*machines)
