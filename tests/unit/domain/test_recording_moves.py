"""Recording a recovery's move in the ledger (domain/recording.py ``moved_ledger``): the
reservation moves from the old card to the new one; a move that keeps its machine or does
not count one more recovery is a programming error, said whole; a ledger that holds the
workload elsewhere than its record names is a conflict, and nothing is written."""

from __future__ import annotations

import re

import pytest
from attrs import evolve

from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.recording import Conflict, moved_ledger
from nodeau.domain.records import Admission, Snapshot, WorkloadRecord
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.scheduling import schedule
from nodeau.domain.workloads import Workload
from tests.support.builders.fleets import request
from tests.support.builders.recovery_inputs import LEDGER, MOVED, T0, service, view

CONFIG = RuntimeConfig(context_tokens=4096)
BEFORE = WorkloadRecord(workload=service(), config=CONFIG, model_path="/m/qwen.gguf")


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def admission_of(w: Workload) -> Admission:
    scheduled = schedule(request("svc"), view()).unwrap()
    assert (scheduled.placement.machine, scheduled.placement.gpu_uuid) == ("attic", "A1")
    return Admission(
        record=WorkloadRecord(workload=w, config=CONFIG, model_path="/m/qwen.gguf"),
        admitted=scheduled.admitted,
        placement=scheduled.placement,
        decided_at=T0,
    )


def test_a_move_takes_the_old_reservation_and_records_the_new_one() -> None:
    other = Reservation(workload="other", machine="cp", gpu_uuid="C1", bytes=1)
    ledger = Ledger(reservations=(*LEDGER.reservations, other))
    moved = moved_ledger(Snapshot(ledger=ledger, workloads=()), BEFORE, admission_of(MOVED))
    assert isinstance(moved, Ledger)
    assert sorted((r.workload, r.machine, r.gpu_uuid) for r in moved.reservations) == [
        ("other", "cp", "C1"),
        ("svc", "attic", "A1"),
    ]


def test_a_ledger_holding_the_workload_on_another_card_is_a_conflict() -> None:
    elsewhere = Ledger(
        reservations=(Reservation(workload="svc", machine="cp", gpu_uuid="C1", bytes=1),)
    )
    snapshot = Snapshot(ledger=elsewhere, workloads=())
    assert moved_ledger(snapshot, BEFORE, admission_of(MOVED)) == Conflict(
        sentence="svc holds C1 on cp in the ledger, not the card its record names; "
        "nothing was recorded"
    )


def test_a_move_onto_its_own_machine_is_refused() -> None:
    same = WorkloadRecord(
        workload=service(machine="attic", gpu_uuid="A1"), config=CONFIG, model_path="/m/q.gguf"
    )
    with pytest.raises(
        ValueError, match=exactly("a move keeps svc and puts it on another machine than attic")
    ):
        moved_ledger(Snapshot(ledger=LEDGER, workloads=()), same, admission_of(MOVED))


def test_a_move_counts_exactly_one_more_recovery() -> None:
    twice = evolve(MOVED, recoveries=2)
    with pytest.raises(ValueError, match=exactly("a move of svc records one more recovery")):
        moved_ledger(Snapshot(ledger=LEDGER, workloads=()), BEFORE, admission_of(twice))
