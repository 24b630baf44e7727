"""Controllers racing on one API server never over-commit a card; a lost write is decided again.

Eight "spawn" processes, each its own client, admit onto one card through ``KubeStateStore.admit``
with a pause inside the decision; only the Reservation's create (409 for all but one) serialises
them (docs/adr/0017).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from attrs import evolve
from kubernetes import client
from returns.pipeline import is_successful
from returns.result import Result

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.guards import AdmissionInFlight, holds_other_card
from nodeau.adapters.kube.objects import get_object
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.domain.recording import CLAIM_GRACE, Claim
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Reservation, over_committed
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import Admission, Snapshot, StateError
from tests.support.builders.admissions import NEEDED_BYTES, Racers, decider, fleet_of
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_store import (
    claims,
    crash_after_the_ledger,
    plant,
    reservations,
    stopped,
)

PROCESSES = 8
ROUNDS = 4
PAUSE_S = 0.005  # inside each decision, between reading the ledger and writing it
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ONE_CARD, TWO_CARDS = fleet_of(1), fleet_of(2)


def a_store(api: client.ApiClient, identity: str) -> KubeStateStore:
    return KubeStateStore(api, clock=lambda: datetime.now(UTC), identity=identity)


def objects(api: client.ApiClient) -> list[str]:
    custom: Any = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES)
    return sorted(item["metadata"]["name"] for item in listed["items"])


@pytest.mark.slow
def test_racing_controllers_never_over_commit_a_card(
    cluster: Cluster, fresh_fleet: client.ApiClient
) -> None:
    store = a_store(fresh_fleet, "referee")
    winners: list[str] = []
    where = f"kube:{cluster.kubeconfig}"
    with Racers(where, PROCESSES, ROUNDS, 1, PAUSE_S) as racers:
        for round_ in range(ROUNDS):
            said = racers.round()
            assert sorted((n, i) for n, i, _, _ in said) == [(round_, i) for i in range(PROCESSES)]
            assert [o for _, _, _, o in said if o.startswith("error")] == []
            won = [name for _, _, name, outcome in said if outcome == "won"]
            assert len(won) == 1, said
            assert {o for _, _, _, o in said if o != "won"} == {ReasonCode.NO_FREE_CARD.value}
            # read back from the cluster: one reservation, the winner's, and its decision
            ledger = store.snapshot().ledger
            assert over_committed(ledger, ONE_CARD) == ()
            assert [x.workload for x in ledger.reservations] == won
            assert store.admission(won[0]).placement.reservation == ledger.reservations[0]
            winners.extend(won)
            assert objects(fresh_fleet) == sorted(winners)  # the refused created nothing
            store.release(won[0], stopped)
    assert racers.exit_codes() == [0] * PROCESSES
    assert store.snapshot().ledger.reservations == ()
    assert len(store.events()) == 2 * ROUNDS  # one Admitted, one Released per round


def interleaved(
    decide: Callable[[Snapshot], Result[Admission, Refusal]], meanwhile: Callable[[], object]
) -> tuple[Callable[[Snapshot], Result[Admission, Refusal]], list[Snapshot]]:
    """``decide``, with ``meanwhile`` run after its first read: its write is then stale."""
    seen: list[Snapshot] = []

    def wrapped(snapshot: Snapshot) -> Result[Admission, Refusal]:
        seen.append(snapshot)
        outcome = decide(snapshot)
        if len(seen) == 1:
            meanwhile()
        return outcome

    return wrapped, seen


def test_a_stale_write_is_decided_again_not_lost(fresh_fleet: client.ApiClient) -> None:
    mine, theirs = a_store(fresh_fleet, "mine"), a_store(fresh_fleet, "theirs")
    taken: list[Admission] = []
    decide, seen = interleaved(
        decider("chat", TWO_CARDS, NOW),
        lambda: taken.append(theirs.admit("embed", decider("embed", TWO_CARDS, NOW)).unwrap()),
    )
    chat = mine.admit("chat", decide).unwrap()
    # the first decision chose the card the other store took first; its claim was refused
    assert len(seen) == 2
    assert seen[0].ledger.reservations == ()
    assert seen[1].ledger.reservations == (taken[0].placement.reservation,)
    assert chat.placement.gpu_uuid != taken[0].placement.gpu_uuid
    ledger = mine.snapshot().ledger
    assert ledger.reservations == (chat.placement.reservation, taken[0].placement.reservation)
    assert over_committed(ledger, TWO_CARDS) == ()
    assert mine.admission("chat") == chat


def test_a_stale_write_for_the_last_card_becomes_a_capacity_refusal(
    fresh_fleet: client.ApiClient,
) -> None:
    mine, theirs = a_store(fresh_fleet, "mine"), a_store(fresh_fleet, "theirs")
    decide, seen = interleaved(
        decider("chat", ONE_CARD, NOW),
        lambda: theirs.admit("embed", decider("embed", ONE_CARD, NOW)).unwrap(),
    )
    outcome = mine.admit("chat", decide)
    assert not is_successful(outcome)
    assert outcome.failure().code is ReasonCode.NO_FREE_CARD
    # decided on the stale ledger, then again on the new one; the workload is named, so no
    # decision is asked only to learn which workload a refusal is about
    assert len(seen) == 2
    assert [x.workload for x in seen[1].ledger.reservations] == ["embed"]
    assert [x.workload for x in mine.snapshot().ledger.reservations] == ["embed"]
    assert objects(fresh_fleet) == ["embed"]


def leftover(workload: str, card: int = 0) -> Reservation:
    return Reservation(
        workload=workload, machine="m1", gpu_uuid=f"GPU-{card:04d}-race", bytes=NEEDED_BYTES
    )


def test_a_crash_leftover_is_dropped_when_its_workload_is_admitted(
    fresh_fleet: client.ApiClient,
) -> None:
    store = a_store(fresh_fleet, "after-the-crash")
    # this controller's own claim, made just before it crashed and came back
    crash_after_the_ledger(fresh_fleet, leftover("chat"), by="after-the-crash", at=a_moment_ago())
    # the card is held by nobody that recorded it: within the grace, the snapshot shows it
    assert store.snapshot().ledger.reservations == (leftover("chat"),)
    # chat's own leftover does not keep chat off the only card, and is replaced
    chat = store.admit("chat", decider("chat", ONE_CARD, NOW)).unwrap()
    assert chat.placement.gpu_uuid == "GPU-0000-race"
    assert store.snapshot().ledger.reservations == (chat.placement.reservation,)
    assert all(c.held_by is None for c in chat.admitted.cards)  # decided without it
    # a leftover of a finished workload's new admission is dropped the same way
    store.release("chat", stopped)
    crash_after_the_ledger(fresh_fleet, leftover("chat"), by="after-the-crash", at=a_moment_ago())
    again = store.admit("chat", decider("chat", ONE_CARD, NOW)).unwrap()
    assert reservations(fresh_fleet) == (again.placement.reservation,)


def test_another_workloads_leftover_is_left_alone(fresh_fleet: client.ApiClient) -> None:
    store = a_store(fresh_fleet, "careful")
    crash_after_the_ledger(fresh_fleet, leftover("ghost"), at=a_moment_ago())
    # it may be an admission still in flight: the card stays taken
    refused = store.admit("chat", decider("chat", ONE_CARD, NOW))
    assert refused.failure().code is ReasonCode.NO_FREE_CARD
    chat = store.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()
    assert chat.placement.gpu_uuid == "GPU-0001-race"
    assert store.snapshot().ledger.reservations == (
        chat.placement.reservation,
        leftover("ghost"),
    )


def a_moment_ago() -> datetime:
    return datetime.now(UTC) - timedelta(seconds=1)


def admission_in_flight(
    api: client.ApiClient, reservation: Reservation, by: str, at: datetime
) -> None:
    """What another controller has written between its claim and its status write."""
    plant(api, reservation, by=by, at=at)


def test_another_controllers_admission_in_flight_of_the_same_workload_stands(
    fresh_fleet: client.ApiClient,
) -> None:
    store = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="second")
    admission_in_flight(fresh_fleet, leftover("chat"), "first", NOW - timedelta(seconds=5))
    with pytest.raises(AdmissionInFlight, match="chat is being admitted by first"):
        store.admit("chat", decider("chat", TWO_CARDS, NOW))
    # nothing was written: the first controller's reservation and claim are as it left them
    assert reservations(fresh_fleet) == (leftover("chat"),)
    assert claims(fresh_fleet) == {"chat": Claim(by="first", at=NOW - timedelta(seconds=5))}
    assert objects(fresh_fleet) == []


def test_a_claim_older_than_the_grace_is_a_leftover_and_is_replaced(
    fresh_fleet: client.ApiClient,
) -> None:
    store = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="second")
    stale = NOW - CLAIM_GRACE
    admission_in_flight(fresh_fleet, leftover("chat", card=1), "first", stale)
    chat = store.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()
    assert reservations(fresh_fleet) == (chat.placement.reservation,)
    assert claims(fresh_fleet) == {"chat": Claim(by="second", at=NOW)}


def test_a_status_recording_another_live_admission_is_never_overwritten(
    fresh_fleet: client.ApiClient,
) -> None:
    first = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="first")
    recorded = first.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()
    # what a controller stalled past the grace would write: chat on the other card
    other_card = next(
        c.gpu_uuid for c in recorded.admitted.cards if c.gpu_uuid != recorded.placement.gpu_uuid
    )
    moved = evolve(
        recorded,
        placement=evolve(
            recorded.placement,
            gpu_uuid=other_card,
            reservation=evolve(recorded.placement.reservation, gpu_uuid=other_card),
        ),
    )
    live = get_object(fresh_fleet, WorkloadKind.SERVICE, "chat")
    assert live is not None
    assert holds_other_card(live, moved)
    assert not holds_other_card(live, recorded)  # writing the same decision again is harmless
    first.release("chat", stopped)
    finished = get_object(fresh_fleet, WorkloadKind.SERVICE, "chat")
    assert finished is not None
    assert not holds_other_card(finished, moved)  # a finished workload may be admitted again


def as_batch(
    decide: Callable[[Snapshot], Result[Admission, Refusal]],
) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    """The same decision, for a batch job of that name."""

    def batch(snapshot: Snapshot) -> Result[Admission, Refusal]:
        return decide(snapshot).map(
            lambda a: evolve(
                a,
                record=evolve(
                    a.record, workload=evolve(a.record.workload, kind=WorkloadKind.BATCH)
                ),
            )
        )

    return batch


def test_a_batch_job_may_not_take_the_name_of_a_service_holding_a_card(
    fresh_fleet: client.ApiClient,
) -> None:
    store = a_store(fresh_fleet, "names")
    store.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()
    with pytest.raises(StateError, match="a GPUService and a BatchJob cannot share a name"):
        store.admit("chat", as_batch(decider("chat", TWO_CARDS, NOW)))
    assert [x.workload for x in store.snapshot().ledger.reservations] == ["chat"]
    store.release("chat", stopped)  # once the service is finished, the name is free again
    job = store.admit("chat", as_batch(decider("chat", TWO_CARDS, NOW))).unwrap()
    assert job.record.workload.kind is WorkloadKind.BATCH
    # the batch job is the one its name now finds
    moved = store.update("chat", lambda r: evolve(r, endpoint_port=9))
    assert moved.workload.kind is WorkloadKind.BATCH
    assert store.admission("chat").record.workload.kind is WorkloadKind.BATCH
