"""What every store that admits splits keeps: every card of a split held in the one write
that admits it and freed together in the one write that releases it, and a split one of
whose cards is held refused with nothing recorded. Run on SQLite and the in-memory fake
(tests/contract/test_a_split_is_held_and_freed_in_one_write.py) and on a real API server
(tests/kube/test_a_split_is_held_and_freed_on_the_fleet.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from returns.result import Failure, Result

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.lifecycle import with_state
from nodeau.domain.memory import MeasuredTable, RuntimeConfig, predictor
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger
from nodeau.domain.scheduling import FleetView, scheduled_admission
from nodeau.domain.split_placement import SplitAsk
from nodeau.domain.units import GIB
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, WorkloadState
from nodeau.ports.state import Admission, Snapshot, StateError, StateStore
from tests.support.builders.split_fleets import ARCH

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CONFIG = RuntimeConfig(context_tokens=4096)
CARDS = tuple(Gpu(uuid=f"GPU-{i}", model="16 GiB card", total_bytes=16 * GIB) for i in range(3))
FLEET = Fleet(machines=(Machine(name="m1", gpus=CARDS),))
WEIGHTS = LayerWeights(input_bytes=GIB, layer_bytes=(2 * GIB,) * 8, output_bytes=GIB)


def decide_big(name: str) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    request = AdmissionRequest(workload=name, model="big", artifact_id="ab" * 32, config=CONFIG)
    predict = predictor(
        arch=ARCH, artifact_id=request.artifact_id, artifact_bytes=18 * GIB, config=CONFIG,
        table=MeasuredTable(), allowances=Allowances(),
    )  # fmt: skip

    def decide(snapshot: Snapshot) -> Result[Admission, Refusal]:
        view = FleetView(
            fleet=FLEET, ledger=snapshot.ledger, settings=SchedulingSettings(), excluded=(),
            verified_on=frozenset({"m1"}), predict=predict, plan=ENTERPRISE,
            split=SplitAsk(arch=ARCH, weights=WEIGHTS, config=CONFIG, allowances=Allowances()),
        )  # fmt: skip
        return scheduled_admission(
            request, view, kind=WorkloadKind.SERVICE, recovery=RecoveryMode.NEVER,
            recovery_after=timedelta(minutes=3), model_path=lambda _m: "/models/big.gguf",
            now=NOW,
        )  # fmt: skip

    return decide


def test_every_card_of_a_split_is_held_at_once_and_freed_at_once(store: StateStore) -> None:
    admission = store.admit("big", decide_big("big")).unwrap()
    cards = admission.record.workload.cards
    assert len(cards) == 2 and admission.record.workload.tensor_split == admission.placement.counts
    held = store.snapshot().ledger.reservations
    assert held == admission.placement.reservations
    assert [r.gpu_uuid for r in held] == list(cards)
    assert store.admission("big") == admission  # the shares and counts read back

    store.release("big", lambda r: with_state(r, WorkloadState.STOPPED, NOW))
    assert store.snapshot().ledger == Ledger()
    *_, freed = store.events("big")
    assert freed.text.startswith(f"stopped; {cards[0]}, {cards[1]} on m1 are free again (")


def test_a_split_one_of_whose_cards_is_taken_meanwhile_records_nothing(store: StateStore) -> None:
    store.admit("big", decide_big("big")).unwrap()
    before = (store.snapshot(), store.events())

    def blind(_snapshot: Snapshot) -> Result[Admission, Refusal]:
        return decide_big("other")(Snapshot(ledger=Ledger(), workloads=()))

    with pytest.raises(StateError, match=r"^admitting other would over-commit GPU-"):
        store.admit("other", blind)
    assert (store.snapshot(), store.events()) == before
    # decided on the ledger as it is, the one card left cannot take it
    refused = store.admit("other", decide_big("other"))
    assert isinstance(refused, Failure)
    assert refused.failure().sentence.endswith("split by layers")
    assert (store.snapshot(), store.events()) == before
