"""Admission: every card weighed by the ledger, typed capacity refusals, kept arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from nodeau.domain.admission import (
    AdmissionRequest,
    Admitted,
    admit,
    assess_cards,
    capacity_refusal,
    card_rejection,
    gib,
)
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, MIB, Prediction, RuntimeConfig, Source, Term
from nodeau.domain.refusals import ReasonCode, RefusalKind
from nodeau.domain.reservations import Ledger, Reservation
from tests.support.builders.admissions import ARTIFACT, MACHINE, PREDICTION, fleet_of
from tests.support.builders.fleets import flat, fleet, fleets, gpu, machine, request

R = ReasonCode


@pytest.mark.parametrize(
    ("needed", "total", "free", "verified", "expected"),
    [
        (10, 24, 24, True, None),
        (24, 24, 24, True, None),  # exactly fits
        (25, 24, 24, True, R.CARD_TOO_SMALL),
        (25, 24, 0, False, R.CARD_TOO_SMALL),  # too small beats everything
        (10, 24, 0, True, R.CARD_HELD),
        (10, 24, 0, False, R.CARD_HELD),  # held beats a missing copy
        (10, 24, 9, True, R.CARD_HELD),
        (10, 24, 10, True, None),
        (10, 24, 24, False, R.NO_VERIFIED_COPY),
    ],
)
def test_card_rejection_matrix(
    needed: int, total: int, free: int, verified: bool, expected: ReasonCode | None
) -> None:
    got = card_rejection(
        needed=needed * GIB, total=total * GIB, free=free * GIB, verified_copy=verified
    )
    assert got is expected


def test_admitted_keeps_every_cards_arithmetic() -> None:
    f = fleet(
        machine("garage", gpu("GPU-1", 24), gpu("GPU-2", 48)), machine("attic", gpu("GPU-3", 16))
    )
    ledger = Ledger(
        reservations=(
            Reservation(workload="old", machine="garage", gpu_uuid="GPU-1", bytes=20 * GIB),
        )
    )
    admitted = admit(request(), f, ledger, frozenset({"garage", "attic"}), flat(18 * GIB)).unwrap()
    assert isinstance(admitted, Admitted)
    by_uuid = {c.gpu_uuid: c for c in admitted.cards}
    one, two, three = by_uuid["GPU-1"], by_uuid["GPU-2"], by_uuid["GPU-3"]
    assert (one.total_bytes, one.reserved_bytes, one.free_bytes) == (24 * GIB, 20 * GIB, 0)
    assert (one.held_by, one.rejection) == ("old", R.CARD_HELD)
    assert (two.free_bytes, two.needed_bytes, two.rejection) == (48 * GIB, 18 * GIB, None)
    assert (three.rejection, three.machine) == (R.CARD_TOO_SMALL, "attic")
    assert {c.gpu_model for c in admitted.cards} == {"NVIDIA L4"}
    assert [c.verified_copy for c in admitted.cards] == [True, True, True]
    assert (two.held_by, three.held_by, two.accepted, one.accepted) == (None, None, True, False)
    assert [c.gpu_uuid for c in admitted.candidates] == ["GPU-2"]
    assert admitted.prediction_for("NVIDIA L4").total_bytes == 18 * GIB
    assert all(c.source is Source.ESTIMATED for c in admitted.cards)


def test_prediction_is_made_once_per_gpu_model_and_kept() -> None:
    calls: list[str] = []

    def predict(model: str) -> Prediction:
        calls.append(model)
        size = 10 * GIB if model == "H200" else 30 * GIB
        src = Source.MEASURED if model == "H200" else Source.ESTIMATED
        return Prediction(terms=(Term(name="p", bytes=size, source=src, basis="t"),), source=src)

    f = fleet(
        machine("a", gpu("G1", 141, "H200"), gpu("G2", 141, "H200")),
        machine("b", gpu("G3", 24, "L4")),
    )
    predictions, cards = assess_cards(request(), f, Ledger(), frozenset({"a", "b"}), predict)
    assert calls == ["H200", "L4"]
    assert [m for m, _p in predictions] == ["H200", "L4"]
    assert [(c.gpu_uuid, c.source, c.rejection) for c in cards] == [
        ("G1", Source.MEASURED, None),
        ("G2", Source.MEASURED, None),
        ("G3", Source.ESTIMATED, R.CARD_TOO_SMALL),
    ]


def test_refusal_when_no_card_is_large_enough() -> None:
    f = fleet(machine("garage", gpu("GPU-1", 24)), machine("attic", gpu("GPU-2", 16)))
    refusal = admit(request(), f, Ledger(), frozenset({"garage"}), flat(30 * GIB)).failure()
    assert refusal.kind is RefusalKind.CAPACITY
    assert refusal.code is R.NO_CARD_LARGE_ENOUGH
    assert refusal.sentence == (
        "qwen needs 30.00 GiB (estimated) and the largest card, GPU-1 on garage, has 24.00 GiB"
    )


def test_refusal_when_every_large_card_is_held() -> None:
    f = fleet(machine("garage", gpu("GPU-1", 24), gpu("GPU-2", 8)))
    ledger = Ledger(
        reservations=(Reservation(workload="chat", machine="garage", gpu_uuid="GPU-1", bytes=GIB),)
    )
    refusal = admit(request(), f, ledger, frozenset({"garage"}), flat(12 * GIB)).failure()
    assert refusal.code is R.NO_FREE_CARD
    assert refusal.sentence == (
        "qwen needs 12.00 GiB (estimated); every card large enough is held: GPU-1 on garage by chat"
    )


def test_refusal_when_the_free_card_has_no_verified_copy() -> None:
    f = fleet(machine("garage", gpu("GPU-1", 24)), machine("attic", gpu("GPU-2", 24)))
    outcome = admit(request(), f, Ledger(), frozenset({"shed"}), flat(12 * GIB))
    refusal = outcome.failure()
    assert refusal.code is R.NO_VERIFIED_COPY
    assert refusal.sentence == (
        "qwen fits a free card on attic, garage, but no such machine holds a verified copy of "
        "its files; fetch or import it there, then verify it"
    )


def test_refusal_with_no_gpu_at_all() -> None:
    refusal = capacity_refusal(request(), ())
    assert refusal.code is R.NO_CARD_LARGE_ENOUGH
    assert refusal.sentence == "qwen cannot run: no machine in the fleet reports a GPU"
    empty = admit(request(), fleet(machine("laptop")), Ledger(), frozenset(), flat(GIB))
    assert empty.failure() == refusal


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0.00 GiB"), (GIB, "1.00 GiB"), (1536 * MIB, "1.50 GiB"), (5 * MIB, "0.00 GiB")],
)
def test_gib(n: int, text: str) -> None:
    assert gib(n) == text


def admissible(f: Fleet, ledger: Ledger, verified: frozenset[str], needed: int) -> bool:
    """The reference answer: some card with room per the ledger, unheld, on a verified machine."""
    return any(
        ledger.holder(g.uuid) is None and needed <= g.total_bytes and m.name in verified
        for m, g in f.gpus
    )


@given(fleets(), st.integers(1, 100), st.data())
def test_admitted_iff_some_card_can_take_it(f: Fleet, needed_gib: int, data: st.DataObject) -> None:
    cards = [(m.name, g.uuid) for m, g in f.gpus]
    held = data.draw(st.lists(st.sampled_from(cards), unique=True)) if cards else []
    ledger = Ledger(
        reservations=tuple(
            Reservation(workload=f"w{i}", machine=m, gpu_uuid=u, bytes=GIB)
            for i, (m, u) in enumerate(held)
        )
    )
    verified = frozenset(data.draw(st.lists(st.sampled_from([m.name for m in f.machines]))))
    needed = needed_gib * GIB
    match admit(request(), f, ledger, verified, flat(needed)):
        case Success(admitted):
            assert admissible(f, ledger, verified, needed)
            assert admitted.candidates
            for c in admitted.candidates:
                assert c.held_by is None
                assert c.needed_bytes <= c.free_bytes
                assert c.machine in verified
        case Failure(refusal):
            assert not admissible(f, ledger, verified, needed)
            assert refusal.kind is RefusalKind.CAPACITY


def test_every_card_held_is_refused_naming_each_card_its_machine_and_holder() -> None:
    ledger = Ledger(
        reservations=(
            Reservation(workload="a", machine=MACHINE, gpu_uuid="GPU-0000-race", bytes=1),
            Reservation(workload="b", machine=MACHINE, gpu_uuid="GPU-0001-race", bytes=1),
        )
    )
    request = AdmissionRequest(
        workload="chat",
        model="qwen-race",
        artifact_id=ARTIFACT,
        config=RuntimeConfig(context_tokens=4096),
    )
    refusal = admit(request, fleet_of(2), ledger, frozenset({MACHINE}), lambda _: PREDICTION)
    failed = refusal.failure()
    assert failed.code is ReasonCode.NO_FREE_CARD
    assert failed.sentence == (
        "qwen-race needs 9.00 GiB (estimated); every card large enough is held: "
        "GPU-0000-race on m1 by a, GPU-0001-race on m1 by b"
    )


@pytest.mark.parametrize(
    ("machines", "named"),
    [
        (8, "m0, m1, m2, m3, m4, m5, m6, m7"),
        (9, "m0, m1, m2, m3, m4, m5, m6, m7 and 1 more"),
    ],
)
def test_a_refusal_for_copies_counts_only_the_machines_it_does_not_name(
    machines: int, named: str
) -> None:
    f = fleet(*(machine(f"m{i}", gpu(f"GPU-{i}", 24)) for i in range(machines)))
    refusal = admit(request(), f, Ledger(), frozenset(), flat(12 * GIB)).failure()
    assert refusal.sentence == (
        f"qwen fits a free card on {named}, but no such machine holds a verified copy of "
        "its files; fetch or import it there, then verify it"
    )


def test_a_refusal_naming_holders_counts_the_one_it_does_not_name() -> None:
    f = fleet(machine("m", *(gpu(f"GPU-{j}", 24) for j in range(9))))
    ledger = Ledger(
        reservations=tuple(
            Reservation(workload=f"w{j}", machine="m", gpu_uuid=f"GPU-{j}", bytes=GIB)
            for j in range(9)
        )
    )
    refusal = admit(request(), f, ledger, frozenset({"m"}), flat(12 * GIB)).failure()
    assert refusal.sentence == (
        "qwen needs 12.00 GiB (estimated); every card large enough is held: "
        + ", ".join(f"GPU-{j} on m by w{j}" for j in range(8))
        + ", and 1 more"
    )
