"""The StateStore contract, run against SQLite and the in-memory fake alike."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path

import pytest
from attrs import evolve, frozen
from returns.pipeline import is_successful
from returns.result import Result

from nodeau.adapters.sqlite_state import SqliteStateStore, _converter
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
from tests.support.admissions import decider, fleet_of
from tests.support.clock import ticking
from tests.support.fake_state import FakeStateStore

NOW = datetime(2026, 3, 1, 12, 0, 0, 250, tzinfo=timezone(timedelta(hours=2)))
ONE_CARD = fleet_of(1)
TWO_CARDS = fleet_of(2)
RECOVERY = timedelta(minutes=3)
START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)  # the store's clock: one second a call


@pytest.fixture(params=["sqlite", "fake"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    clock = ticking(START)
    if request.param == "sqlite":
        yield SqliteStateStore(tmp_path / "state" / "plane.sqlite3", clock=clock)
    else:
        yield FakeStateStore(clock=clock)


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


# SQLite only: what lasts, what is stored, what fails


def test_reopening_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking(START))
    chat = admit(store, "chat", TWO_CARDS)
    admit(store, "embed", TWO_CARDS)
    store.release("embed", in_state(WorkloadState.SUCCEEDED))
    store.record_event(Event(at=NOW, workload="chat", text="endpoint up"))
    again = SqliteStateStore(path, clock=ticking(START))
    assert again.snapshot() == store.snapshot()
    assert again.admission("chat") == chat
    assert again.events() == store.events()
    assert len(again.events()) == 4


def test_values_are_stored_as_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking(START))
    admit(store, "chat", TWO_CARDS)
    admit(store, "embed", TWO_CARDS, recovery_after=timedelta(seconds=90.5))
    db = sqlite3.connect(path)
    try:
        (record,) = db.execute("SELECT record FROM workloads WHERE name = 'embed'").fetchone()
        (decision,) = db.execute(
            "SELECT decision FROM admissions WHERE workload = 'embed'"
        ).fetchone()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()
    workload = json.loads(record)["workload"]
    assert workload["recovery_after"] == 90.5
    assert workload["since"] == "2026-03-01T12:00:00.000250+02:00"
    assert (workload["state"], workload["kind"]) == ("admitted", "service")
    ranked = json.loads(decision)["placement"]["ranked"]
    assert [r["score"] for r in ranked] == ["1/2"]
    assert mode == "wal"


@frozen(kw_only=True)
class _Odd:
    where: Path
    share: Fraction
    gap: timedelta
    at: datetime
    state: WorkloadState | None


@pytest.mark.parametrize(
    "value",
    [
        _Odd(
            where=Path("/models/a b.gguf"),
            share=Fraction(-7, 3),
            gap=timedelta(days=2, microseconds=1),
            at=datetime(2026, 1, 1, tzinfo=UTC),
            state=WorkloadState.HELD,
        ),
        _Odd(
            where=Path("relative/x"),
            share=Fraction(0),
            gap=timedelta(0),
            at=datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(-timedelta(hours=5))),
            state=None,
        ),
    ],
)
def test_the_converter_round_trips_exactly(value: _Odd) -> None:
    text = json.dumps(_converter.unstructure(value))
    assert _converter.structure(json.loads(text), _Odd) == value


def test_a_file_that_is_not_a_database_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    path.write_bytes(b"this is not SQLite, just text " * 100)
    with pytest.raises(StateError) as caught:
        SqliteStateStore(path, clock=ticking())
    assert str(caught.value).startswith(f"{path}: cannot ")
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.Error)


def test_a_row_that_does_not_read_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking())
    admit(store, "chat")
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(
                "UPDATE workloads SET record = json_set(record, '$.workload.state', 'dancing')"
            )
    finally:
        db.close()
    with pytest.raises(StateError) as caught:
        store.snapshot()
    message = str(caught.value)
    assert message.startswith(f"{path}: the record of chat cannot be read (")
    assert "\n" not in message


def test_the_schema_itself_refuses_a_second_holder_for_a_card(tmp_path: Path) -> None:
    path = tmp_path / "plane.sqlite3"
    store = SqliteStateStore(path, clock=ticking())
    chat = admit(store, "chat")
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO workloads (name, record) VALUES ('sneaky', '{}')")
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            db.execute(
                "INSERT INTO reservations (workload, machine, gpu_uuid, bytes) "
                "VALUES ('sneaky', 'm1', ?, 1)",
                (chat.placement.gpu_uuid,),
            )
    finally:
        db.close()
