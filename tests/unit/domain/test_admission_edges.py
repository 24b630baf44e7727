"""Admission's capacity refusal when every card large enough is held: the whole sentence,
each held card named with its machine and holder, in the fleet's order."""

from __future__ import annotations

from nodeau.domain.admission import AdmissionRequest, admit
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import Ledger, Reservation
from tests.support.admissions import ARTIFACT, MACHINE, PREDICTION, fleet_of


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
