"""What is said of a workload split across cards names each of its cards, one ", " between
two: the line ``nodeau ps`` prints, the sentence of a recovery that moves it, and the conflict
of an admission decided blind on cards another split holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodeau.domain.recording import Conflict, admitted_ledger
from nodeau.domain.recovery import RecoveryAction, decide_recovery
from nodeau.domain.reservations import Ledger
from nodeau.domain.units import GIB
from nodeau.domain.workloads import Workload, WorkloadKind, WorkloadState, ps_sentence
from nodeau.ports.state import Snapshot
from tests.support.builders.fleets import flat, fleet, gpu, machine, request
from tests.support.builders.recovery_inputs import T0, service, unreachable_since, view
from tests.support.builders.split_fleets import ask
from tests.support.contracts.split_state_contract import WEIGHTS, decide_big

EMPTY = Snapshot(ledger=Ledger(), workloads=())


def test_ps_names_each_card_of_a_split_with_its_machine() -> None:
    since = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    split = Workload(
        name="big", kind=WorkloadKind.SERVICE, model="big", artifact_id="ab" * 32,
        machine="m1", gpu_uuid="GPU-5e0b3a1c", state=WorkloadState.SERVING, since=since,
        more_cards=("GPU-77aa01ff",), tensor_split=(6, 3),
    )  # fmt: skip
    assert ps_sentence(split, since + timedelta(minutes=5)) == (
        "serving on m1 (GPU-5e0b…, GPU-77aa…) since 12:00:00 (5m); nothing to do"
    )


def test_a_recovery_onto_a_split_names_each_card_it_starts_on() -> None:
    cards = fleet(
        machine("garage", gpu("G1", 24)),
        machine("shed", gpu("S0", 16), gpu("S1", 16), gpu("S2", 16)),
    )
    onto = view(
        fleet=cards,
        verified_on=frozenset({"garage", "shed"}),
        predict=flat(30 * GIB),  # whole, no card holds it: only a split does
        split=ask(WEIGHTS),
    )
    decided = decide_recovery(
        service(), request("svc"), unreachable_since(T0 - timedelta(minutes=3)), T0, onto, None
    )
    assert decided.action is RecoveryAction.RECOVER
    assert decided.sentence == (
        "garage has been unreachable for 0:03:00; svc starts on shed (S0, S1); "
        "its endpoint stays the same"
    )


def test_an_admission_blind_to_a_split_names_each_card_it_would_over_commit() -> None:
    big = decide_big("big")(EMPTY).unwrap()
    held = admitted_ledger(EMPTY, big)
    assert isinstance(held, Ledger)
    other = decide_big("other")(EMPTY).unwrap()  # decided on a ledger that holds nothing
    assert admitted_ledger(Snapshot(ledger=held, workloads=(big.record,)), other) == Conflict(
        sentence="admitting other would over-commit GPU-0, GPU-1; nothing was recorded "
        "(GPU-0 on m1 is held by big; a card is held by one workload at a time)"
    )
