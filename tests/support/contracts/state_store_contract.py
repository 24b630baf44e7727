"""The StateStore contract: every test here runs against each store that takes it.

The tests take a ``store``; tests/contract/test_state_store.py runs them on SQLite and in memory,
tests/kube/test_state_store_contract.py on ``KubeStateStore``, each keeping the test ids.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction

import pytest
from attrs import evolve
from returns.pipeline import is_successful
from returns.result import Result

from nodeau.domain.hardware import Fleet
from nodeau.domain.placement import Policy
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, over_committed
from nodeau.domain.workloads import WorkloadState
from nodeau.ports.runtime import RunningServer
from nodeau.ports.state import (
    Admission,
    Event,
    Snapshot,
    StateError,
    StateStore,
    UnknownWorkload,
    WorkloadRecord,
)
from tests.support.builders.admissions import decider, fleet_of

NOW = datetime(2026, 3, 1, 12, 0, 0, 250, tzinfo=timezone(timedelta(hours=2)))
ONE_CARD = fleet_of(1)
TWO_CARDS = fleet_of(2)
RECOVERY = timedelta(minutes=3)
START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)  # the store's clock: one second a call


def admit(
    store: StateStore, name: str, fleet: Fleet = ONE_CARD, recovery_after: timedelta = RECOVERY
) -> Admission:
    outcome = store.admit(name, decider(name, fleet, NOW, recovery_after=recovery_after))
    assert is_successful(outcome), outcome
    return outcome.unwrap()


def in_state(state: WorkloadState) -> Callable[[WorkloadRecord], WorkloadRecord]:
    def change(record: WorkloadRecord) -> WorkloadRecord:
        return evolve(record, workload=evolve(record.workload, state=state, since=NOW))

    return change


def test_a_new_store_is_empty(store: StateStore) -> None:
    assert store.snapshot() == Snapshot(ledger=Ledger(), workloads=())
    assert store.events() == ()


def test_an_admission_records_the_workload_its_reservation_its_decision_and_an_event(
    store: StateStore,
) -> None:
    first = admit(store, "chat", TWO_CARDS)
    second = admit(store, "embed", TWO_CARDS, recovery_after=timedelta(seconds=90.5))
    snapshot = store.snapshot()
    assert snapshot.workloads == (first.record, second.record)
    assert snapshot.named("embed") == second.record
    assert snapshot.ledger == Ledger(
        reservations=(first.placement.reservation, second.placement.reservation)
    )
    assert over_committed(snapshot.ledger, TWO_CARDS) == ()
    # every term of the explanation comes back exactly: Fraction, timedelta, offsets, enums
    assert store.admission("chat") == first
    assert store.admission("embed") == second
    ranked = store.admission("embed").placement.ranked[0]
    assert (ranked.score, type(ranked.score), ranked.policy) == (
        Fraction(1, 2),
        Fraction,
        Policy.PACK,
    )
    assert store.admission("embed").record.workload.recovery_after == timedelta(seconds=90.5)
    assert store.admission("chat").decided_at.utcoffset() == timedelta(hours=2)
    assert [(e.workload, e.at) for e in store.events()] == [
        ("chat", START),
        ("embed", START + timedelta(seconds=1)),
    ]
    assert store.events("chat")[0].text.startswith(
        f"admitted onto {first.placement.gpu_uuid} on m1, reserving 9.00 GiB"
    )


def test_a_refusal_records_nothing(store: StateStore) -> None:
    admit(store, "chat")
    before = (store.snapshot(), store.events())
    outcome = store.admit("embed", decider("embed", ONE_CARD, NOW))
    assert not is_successful(outcome)
    assert outcome.failure().code is ReasonCode.NO_FREE_CARD
    assert (store.snapshot(), store.events()) == before
    with pytest.raises(UnknownWorkload):
        store.admission("embed")


def test_a_decision_that_raises_records_nothing(store: StateStore) -> None:
    def broken(_snapshot: Snapshot) -> Result[Admission, Refusal]:
        raise RuntimeError("the decision failed")

    with pytest.raises(RuntimeError, match="the decision failed"):
        store.admit("chat", broken)
    assert store.snapshot() == Snapshot(ledger=Ledger(), workloads=())
    admit(store, "chat")  # and the store is still usable


def test_a_name_in_use_is_a_callers_error_until_it_finishes(store: StateStore) -> None:
    first = admit(store, "chat", TWO_CARDS)
    with pytest.raises(StateError, match=r"^a workload called chat already exists$"):
        store.admit("chat", decider("chat", TWO_CARDS, NOW))
    store.release("chat", in_state(WorkloadState.STOPPED))
    # a finished workload's name can be used again: the new admission replaces the old record
    second = store.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()
    assert store.admission("chat") == second
    [record] = store.snapshot().workloads
    assert record == second.record
    assert record.workload.state is not WorkloadState.STOPPED
    assert len(store.snapshot().ledger.reservations) == 1
    assert first.record.workload.name == second.record.workload.name


def test_a_decision_blind_to_the_ledger_is_not_recorded(store: StateStore) -> None:
    admit(store, "chat")
    blind = decider("embed", ONE_CARD, NOW)
    before = (store.snapshot(), store.events())
    with pytest.raises(StateError, match=r"^admitting embed would over-commit GPU-0000-race;"):
        store.admit("embed", lambda _snapshot: blind(Snapshot(ledger=Ledger(), workloads=())))
    assert (store.snapshot(), store.events()) == before


def test_an_admission_that_contradicts_itself_is_refused(store: StateStore) -> None:
    decide = decider("chat", TWO_CARDS, NOW)

    def moved(snapshot: Snapshot) -> Result[Admission, Refusal]:
        def elsewhere(a: Admission) -> Admission:
            assert a.placement.gpu_uuid == "GPU-0000-race"
            workload = evolve(a.record.workload, gpu_uuid="GPU-0001-race")
            return evolve(a, record=evolve(a.record, workload=workload))

        return decide(snapshot).map(elsewhere)

    with pytest.raises(ValueError, match="but its reservation is for GPU-0000-race"):
        store.admit("chat", moved)
    assert store.snapshot() == Snapshot(ledger=Ledger(), workloads=())


def test_an_update_replaces_the_record_and_leaves_the_decision(store: StateStore) -> None:
    decided = admit(store, "chat")
    server = RunningServer(
        pid=4242, port=18080, started_at=NOW, command=("llama-server", "--port", "18080")
    )

    def serving(record: WorkloadRecord) -> WorkloadRecord:
        return evolve(in_state(WorkloadState.SERVING)(record), endpoint_port=18080, server=server)

    after = store.update("chat", serving)
    assert after.server == server
    snapshot = store.snapshot()
    assert snapshot.named("chat") == after
    assert snapshot.ledger == Ledger(reservations=(decided.placement.reservation,))
    assert store.admission("chat") == decided  # explain shows what was decided
    assert len(store.events()) == 1  # an update writes no event of its own


def test_an_update_keeps_the_name_the_card_and_the_hold(store: StateStore) -> None:
    admit(store, "chat")
    before = store.snapshot()

    def renamed(record: WorkloadRecord) -> WorkloadRecord:
        return evolve(record, workload=evolve(record.workload, name="other"))

    with pytest.raises(ValueError, match="may not make it other"):
        store.update("chat", renamed)
    with pytest.raises(ValueError, match="release frees a card"):
        store.update("chat", in_state(WorkloadState.STOPPED))
    with pytest.raises(ValueError, match="needs a finished state, not serving"):
        store.release("chat", in_state(WorkloadState.SERVING))
    assert store.snapshot() == before


def test_a_release_frees_the_card_for_the_next_admission(store: StateStore) -> None:
    chat = admit(store, "chat")
    assert not is_successful(store.admit("embed", decider("embed", ONE_CARD, NOW)))
    finished = store.release("chat", in_state(WorkloadState.STOPPED))
    assert finished.workload.state is WorkloadState.STOPPED
    assert store.snapshot().ledger == Ledger()
    assert store.snapshot().named("chat") == finished
    assert store.admission("chat") == chat
    embed = admit(store, "embed")
    assert embed.placement.gpu_uuid == chat.placement.gpu_uuid
    assert [(e.workload, e.text.split()[0]) for e in store.events()] == [
        ("chat", "admitted"),
        ("chat", "stopped;"),
        ("embed", "admitted"),
    ]
    assert "GPU-0000-race on m1 is free again" in store.events("chat")[1].text
    store.release("chat", in_state(WorkloadState.FAILED))  # again: nothing left to free
    assert len(store.events("chat")) == 2
    assert store.snapshot().named("chat").workload.state is WorkloadState.FAILED  # type: ignore[union-attr]


def test_unknown_names_are_unknown_workloads(store: StateStore) -> None:
    admit(store, "chat")
    for act in (
        lambda: store.update("ghost", in_state(WorkloadState.STARTING)),
        lambda: store.release("ghost", in_state(WorkloadState.STOPPED)),
        lambda: store.admission("ghost"),
    ):
        with pytest.raises(UnknownWorkload, match=r"^no workload called ghost in "):
            act()
    assert store.events("ghost") == ()


def test_events_are_kept_oldest_first(store: StateStore) -> None:
    admit(store, "chat")
    said = [
        Event(at=NOW + timedelta(seconds=s), workload=w, text=f"note {s}")
        for s, w in ((3, "chat"), (1, "embed"), (2, "chat"))
    ]
    for event in said:
        store.record_event(event)
    assert store.events()[1:] == tuple(said)  # in the order recorded, not by time
    assert store.events("chat")[1:] == (said[0], said[2])
    assert store.events("embed") == (said[1],)


def test_racing_threads_never_over_commit(store: StateStore) -> None:
    threads, start = 8, threading.Barrier(8)
    outcomes: list[Result[Admission, Refusal]] = []

    def one(i: int) -> None:
        start.wait(timeout=30)
        outcomes.append(store.admit(f"t{i}", decider(f"t{i}", ONE_CARD, NOW, pause_s=0.002)))

    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert len(outcomes) == threads
    won = [o for o in outcomes if is_successful(o)]
    assert len(won) == 1
    assert {o.failure().code for o in outcomes if not is_successful(o)} == {ReasonCode.NO_FREE_CARD}
    ledger = store.snapshot().ledger
    assert over_committed(ledger, ONE_CARD) == ()
    assert ledger.reservations == (won[0].unwrap().placement.reservation,)
