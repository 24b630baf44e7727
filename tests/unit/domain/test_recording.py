"""The ledger-write rules at their edges: an admission that contradicts itself is a
programming error with a sentence that says how, a name the ledger holds with no record is a
conflict, a finished record may still be updated; and the ledger's own lookups."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attrs import evolve

from nodeau.domain.recording import Conflict, admitted_ledger, check_update
from nodeau.domain.records import Admission, Snapshot
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.workloads import WorkloadState
from tests.support.builders.admissions import decider, fleet_of

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
EMPTY = Snapshot(ledger=Ledger(), workloads=())


def decided() -> Admission:
    """``chat`` admitted on the first of two cards of machine m1 (GPU-0000-race)."""
    return decider("chat", fleet_of(2), NOW)(EMPTY).unwrap()


def placed_on(admission: Admission, *, machine: str, gpu_uuid: str) -> Admission:
    """The same admission with its workload and its reservation moved alike."""
    record = admission.record
    moved = evolve(record, workload=evolve(record.workload, machine=machine, gpu_uuid=gpu_uuid))
    placement = admission.placement
    reservation = evolve(placement.reservation, machine=machine, gpu_uuid=gpu_uuid)
    return evolve(admission, record=moved, placement=evolve(placement, reservation=reservation))


def test_an_admission_naming_two_workloads_is_a_programming_error_naming_both() -> None:
    admission = decided()
    two = evolve(admission, admitted=evolve(admission.admitted, request=evolve(
        admission.admitted.request, workload="other")))  # fmt: skip
    with pytest.raises(ValueError) as raised:
        admitted_ledger(EMPTY, two)
    assert str(raised.value) == "an admission names more than one workload: ['chat', 'other']"


@pytest.mark.parametrize("state", [WorkloadState.STOPPED, WorkloadState.SUCCEEDED])
def test_an_admission_of_a_finished_workload_is_a_programming_error(state: WorkloadState) -> None:
    admission = decided()
    finished = evolve(
        admission, record=evolve(admission.record, workload=evolve(admission.record.workload,
                                                                    state=state))
    )  # fmt: skip
    with pytest.raises(ValueError) as raised:
        admitted_ledger(EMPTY, finished)
    assert str(raised.value) == f"an admitted workload holds its card; chat is {state.value}"


def test_an_admission_of_a_card_it_never_assessed_is_a_programming_error() -> None:
    elsewhere = placed_on(decided(), machine="m1", gpu_uuid="GPU-nowhere")
    with pytest.raises(ValueError) as raised:
        admitted_ledger(EMPTY, elsewhere)
    assert str(raised.value) == "chat reserves GPU-nowhere, a card its admission never assessed"


def test_an_admission_of_an_assessed_card_on_another_machine_is_a_programming_error() -> None:
    wrong_machine = placed_on(decided(), machine="m2", gpu_uuid="GPU-0000-race")
    with pytest.raises(ValueError) as raised:
        admitted_ledger(EMPTY, wrong_machine)
    assert str(raised.value) == "chat reserves GPU-0000-race, a card its admission never assessed"


def test_a_name_the_ledger_holds_without_a_record_is_a_conflict() -> None:
    leftover = Reservation(workload="chat", machine="m1", gpu_uuid="GPU-0001-race", bytes=1)
    snapshot = Snapshot(ledger=Ledger(reservations=(leftover,)), workloads=())
    assert admitted_ledger(snapshot, decided()) == Conflict(
        sentence="chat already holds a reservation; nothing was recorded"
    )


def test_another_name_in_the_ledger_is_no_conflict() -> None:
    other = Reservation(workload="other", machine="m1", gpu_uuid="GPU-0001-race", bytes=1)
    snapshot = Snapshot(ledger=Ledger(reservations=(other,)), workloads=())
    after = admitted_ledger(snapshot, decided())
    assert isinstance(after, Ledger)
    assert [r.workload for r in after.reservations] == ["other", "chat"]


def test_a_finished_record_may_be_updated_and_stays_finished() -> None:
    record = decided().record
    stopped = evolve(record, workload=evolve(record.workload, state=WorkloadState.STOPPED))
    failed = evolve(record, workload=evolve(record.workload, state=WorkloadState.FAILED))
    check_update(stopped, failed)  # raises if the rule were broken
    with pytest.raises(ValueError) as raised:
        check_update(stopped, record)
    assert str(raised.value).startswith("chat cannot go from stopped to ")


def test_a_ledger_lists_a_machines_reservations_in_its_order() -> None:
    a = Reservation(workload="a", machine="m1", gpu_uuid="GPU-a", bytes=1)
    b = Reservation(workload="b", machine="m2", gpu_uuid="GPU-b", bytes=2)
    c = Reservation(workload="c", machine="m1", gpu_uuid="GPU-c", bytes=3)
    ledger = Ledger(reservations=(a, b, c))
    assert ledger.on_machine("m1") == (a, c)
    assert ledger.on_machine("m3") == ()


def test_a_card_held_twice_in_a_ledger_read_counts_both_reservations_bytes() -> None:
    first = Reservation(workload="a", machine="m1", gpu_uuid="GPU-x", bytes=5)
    second = Reservation(workload="b", machine="m1", gpu_uuid="GPU-x", bytes=7)
    ledger = Ledger(reservations=(first, second))
    assert ledger.reserved_bytes("GPU-x") == 12
    assert ledger.holder("GPU-x") == first
