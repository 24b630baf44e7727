"""Processes racing to admit onto one card never over-commit it (SQLite, real processes).

Eight "spawn" processes, released together each round, admit through ``SqliteStateStore.admit``
with a pause inside the decision; then exactly as many winners as cards, every other one refused
with ``capacity.no-free-card``, and the ledger not over-committed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from attrs import evolve

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.domain.refusals import ReasonCode
from nodeau.domain.reservations import over_committed
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.state import WorkloadRecord
from tests.support.builders.admissions import Racers, fleet_of
from tests.support.clock import ticking

PROCESSES = 8
ROUNDS = 40
PAUSE_S = 0.002  # inside each decision, while the write transaction is held


def stopped(record: WorkloadRecord) -> WorkloadRecord:
    return evolve(record, workload=evolve(record.workload, state=WorkloadState.STOPPED))


@pytest.mark.slow
@pytest.mark.parametrize("cards", [1, 2])
def test_racing_processes_never_over_commit(tmp_path: Path, cards: int) -> None:
    began = time.monotonic()
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking())
    fleet = fleet_of(cards)
    wins: dict[int, int] = {}
    with Racers(f"sqlite:{path}", PROCESSES, ROUNDS, cards, PAUSE_S) as racers:
        for round_ in range(ROUNDS):
            said = racers.round()
            assert sorted((r, i) for r, i, _, _ in said) == [(round_, i) for i in range(PROCESSES)]
            errors = [outcome for _, _, _, outcome in said if outcome.startswith("error")]
            assert errors == []
            winners = sorted(name for _, _, name, outcome in said if outcome == "won")
            refusals = {outcome for _, _, _, outcome in said if outcome != "won"}
            assert len(winners) == cards, said
            assert refusals == {ReasonCode.NO_FREE_CARD.value}
            # the invariant, read back from the database
            ledger = store.snapshot().ledger
            assert over_committed(ledger, fleet) == ()
            assert sorted(r.workload for r in ledger.reservations) == winners
            assert len({r.gpu_uuid for r in ledger.reservations}) == cards
            for name in winners:
                assert store.admission(name).placement.reservation == ledger.of_workload(name)
                store.release(name, stopped)
                wins[int(name.split("-p")[1])] = wins.get(int(name.split("-p")[1]), 0) + 1
    assert racers.exit_codes() == [0] * PROCESSES
    snapshot = store.snapshot()
    assert snapshot.ledger.reservations == ()
    assert len(snapshot.workloads) == ROUNDS * cards  # the refused left no trace
    assert all(w.workload.state is WorkloadState.STOPPED for w in snapshot.workloads)
    assert len(store.events()) == 2 * ROUNDS * cards  # one admitted, one released, per win
    assert sum(wins.values()) == ROUNDS * cards
    print(
        f"{PROCESSES} processes x {ROUNDS} rounds on {cards} card(s): "
        f"{sum(wins.values())} wins, per process {dict(sorted(wins.items()))}, "
        f"{time.monotonic() - began:.1f} s"
    )
