"""What the workloads holding a card spend: each for its own requester, finished ones none;
and the organisation when nothing is configured."""

from __future__ import annotations

from datetime import UTC, datetime

from attrs import evolve

from nodeau.domain.limits import Role
from nodeau.domain.organisation import Organisation, Requester, Spending
from nodeau.domain.records import Snapshot, spending
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import WorkloadState
from tests.support.builders.admissions import decider, fleet_of

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_each_workload_holding_a_card_spends_for_its_requester_and_a_finished_one_not() -> None:
    record = decider("chat", fleet_of(1), NOW)(Snapshot(ledger=Ledger(), workloads=())).unwrap()
    holding = evolve(record.record, requester=Requester(user="ann"))
    finished = evolve(
        record.record,
        requester=Requester(user="bob"),
        workload=evolve(record.record.workload, state=WorkloadState.STOPPED),
    )
    assert spending([holding, finished]) == (Spending(requester=Requester(user="ann")),)


def test_no_organisation_configured_makes_everybody_an_admin_and_says_it_is_not_configured() -> (
    None
):
    assert Organisation.none() == Organisation(configured=False, everyone=Role.ADMIN)
