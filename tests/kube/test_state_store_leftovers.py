"""What a crash or a race leaves among the cards' Reservations is found and freed (ADR 0017).

An unbacked claim is freed once ``CLAIM_GRACE`` old, a fresher one left, a backed one never
touched; of two controllers claiming for one workload, the loser gives its claim back at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client
from returns.result import Result

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.claims import free, read_claim
from nodeau.adapters.kube.guards import AdmissionInFlight
from nodeau.adapters.kube.objects import get_object
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.domain.recording import CLAIM_GRACE
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Reservation
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import Admission, Snapshot
from tests.support.builders.admissions import NEEDED_BYTES, decider, fleet_of
from tests.support.real.kube_controller import controller, create
from tests.support.real.kube_store import LONG_AGO, plant, reservations

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TWO_CARDS = fleet_of(2)


def on_card(workload: str, card: int) -> Reservation:
    return Reservation(
        workload=workload, machine="m1", gpu_uuid=f"GPU-{card:04d}-race", bytes=NEEDED_BYTES
    )


def test_a_claim_no_record_backs_is_freed_once_it_is_older_than_the_grace(
    fresh_fleet: client.ApiClient,
) -> None:
    store = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="controller")
    chat = store.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()  # backed by its status
    plant(fresh_fleet, on_card("ghost", 5), at=NOW - CLAIM_GRACE)  # a crash's, the grace ago
    plant(fresh_fleet, on_card("young", 6), at=NOW - CLAIM_GRACE + timedelta(seconds=1))
    plant(fresh_fleet, on_card("chat", 7), by="controller", at=NOW - timedelta(hours=1))
    snapshot = store.snapshot()
    # the ghost and chat's own second claim (backed by nothing: chat's record names its card)
    # are freed in the cluster and gone from the snapshot; the young claim may be an
    # admission in flight, and chat's admitted card is backed
    kept = (chat.placement.reservation, on_card("young", 6))
    assert snapshot.ledger.reservations == kept
    assert reservations(fresh_fleet) == kept
    assert [r.workload.name for r in snapshot.workloads] == ["chat"]


def test_an_applied_service_deleted_between_its_admission_and_its_guard_has_its_card_freed(
    fresh_fleet: client.ApiClient,
) -> None:
    create(fresh_fleet, "chat", "qwen")  # as a person applies it: no finalizer yet
    store = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="controller")
    chat = store.admit("chat", decider("chat", TWO_CARDS, NOW)).unwrap()
    # the controller guards an admitted object before its server (ADR 0018): deleted before
    # that, it is gone at once, and its claim is backed by nothing
    client.CustomObjectsApi(fresh_fleet).delete_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "chat"
    )
    assert get_object(fresh_fleet, WorkloadKind.SERVICE, "chat") is None
    # an admission in flight looks the same while it is fresh: kept
    assert store.snapshot().ledger.reservations == (chat.placement.reservation,)
    later = KubeStateStore(fresh_fleet, clock=lambda: NOW + CLAIM_GRACE, identity="controller")
    assert later.snapshot().ledger.reservations == ()
    assert reservations(fresh_fleet) == ()


def test_the_controller_frees_a_crash_leftover_on_its_next_pass(
    fresh_fleet: client.ApiClient,
) -> None:
    plant(fresh_fleet, on_card("ghost", 0), at=LONG_AGO)
    plant(fresh_fleet, on_card("in-flight", 1), by="another", at=datetime.now(UTC))
    controller(fresh_fleet).resync()  # the real controller, one pass
    assert reservations(fresh_fleet) == (on_card("in-flight", 1),)


def test_two_controllers_admitting_one_workload_onto_two_cards_leave_one_claim(
    fresh_fleet: client.ApiClient,
) -> None:
    first = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="first")
    second = KubeStateStore(fresh_fleet, clock=lambda: NOW, identity="second")
    plant(fresh_fleet, on_card("other", 0), at=NOW)  # the second decides with card 0 taken
    decide = decider("chat", TWO_CARDS, NOW)

    def meanwhile(snapshot: Snapshot) -> Result[Admission, Refusal]:
        outcome = decide(snapshot)  # card 1, the only one free in what it read
        held = read_claim(fresh_fleet, on_card("other", 0).gpu_uuid)
        assert held is not None
        free(fresh_fleet, held)  # card 0 is freed, and the first takes it for chat
        first.admit("chat", decide).unwrap()
        return outcome

    with pytest.raises(AdmissionInFlight, match="already records another admission"):
        second.admit("chat", meanwhile)
    # the second's claim of card 1 was given back; chat holds card 0, as its status says
    assert reservations(fresh_fleet) == (on_card("chat", 0),)
    recorded = get_object(fresh_fleet, WorkloadKind.SERVICE, "chat")
    assert recorded is not None
    assert recorded.status["gpuUUID"] == on_card("chat", 0).gpu_uuid
    assert isinstance(first.admission("chat"), Admission)
