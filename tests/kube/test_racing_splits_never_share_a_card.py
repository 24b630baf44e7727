"""Controllers racing to split models across the same cards never share a card and never
leave half a split held: four stores (each its own identity, as four controllers) admit a
model that takes two of three cards at once, each pausing inside its decision so that the
decisions overlap; the Reservations' creation alone serialises them (docs/adr/0017).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from kubernetes import client
from returns.result import Failure, Result, Success

from nodeau.adapters.kube.ledger import read_ledger
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger, Reservation, over_committed
from nodeau.domain.units import GIB
from nodeau.ports.state import Admission, Snapshot
from tests.support.contracts.split_state_contract import FLEET, decide_big
from tests.support.real.kube_store import plant

RACERS = 4
PAUSE_S = 0.05  # inside each decision, between reading the ledger and claiming the cards


def paused(decide: Callable[[Snapshot], Result[Admission, Refusal]]) -> Callable[
    [Snapshot], Result[Admission, Refusal]
]:  # fmt: skip
    def deciding(snapshot: Snapshot) -> Result[Admission, Refusal]:
        decided = decide(snapshot)
        time.sleep(PAUSE_S)
        return decided

    return deciding


@pytest.mark.parametrize("round_", range(3))
def test_one_split_wins_the_cards_and_the_others_hold_nothing(
    fresh_fleet: client.ApiClient, round_: int
) -> None:
    stores = [
        KubeStateStore(fresh_fleet, clock=lambda: datetime.now(UTC), identity=f"c{i}")
        for i in range(RACERS)
    ]
    barrier = threading.Barrier(RACERS)
    outcomes: dict[str, object] = {}

    def race(i: int) -> None:
        barrier.wait()
        try:
            outcomes[f"big-{i}"] = stores[i].admit(f"big-{i}", paused(decide_big(f"big-{i}")))
        except Exception as exc:
            outcomes[f"big-{i}"] = exc

    threads = [threading.Thread(target=race, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    won = [n for n, o in outcomes.items() if isinstance(o, Success)]
    lost = [o for o in outcomes.values() if isinstance(o, Failure)]
    assert len(won) == 1 and len(lost) == RACERS - 1, outcomes
    assert all(o.failure().sentence.endswith("split by layers") for o in lost)
    held = read_ledger(fresh_fleet).held
    assert sorted(h.reservation.workload for h in held) == [won[0], won[0]]
    ledger = Ledger(reservations=tuple(h.reservation for h in held))
    assert over_committed(ledger, FLEET) == ()
    admitted = outcomes[won[0]]
    assert isinstance(admitted, Success)
    assert {h.reservation for h in held} == set(admitted.unwrap().placement.reservations)


def test_a_split_whose_second_card_is_taken_meanwhile_gives_the_first_back(
    fresh_fleet: client.ApiClient,
) -> None:
    """Another controller claims the split's second card between the decision and the
    claims: the first card's claim is given back at once and the split is decided again on
    the cards left, never recorded half held."""
    store = KubeStateStore(fresh_fleet, clock=lambda: datetime.now(UTC), identity="c0")
    decide = decide_big("big")
    seen: list[tuple[str, ...]] = []

    def deciding(snapshot: Snapshot) -> Result[Admission, Refusal]:
        decided = decide(snapshot)
        placement = decided.unwrap().placement
        seen.append(tuple(x.gpu_uuid for x in placement.reservations))
        if len(seen) == 1:  # the other controller's claim lands now
            taken = Reservation(workload="other", machine="m1", gpu_uuid=seen[0][1], bytes=GIB)
            plant(fresh_fleet, taken, by="c1", at=datetime.now(UTC))
        return decided

    admitted = store.admit("big", deciding).unwrap()
    first, second = seen
    assert first == ("GPU-0", "GPU-1") and second == ("GPU-0", "GPU-2")
    assert admitted.record.workload.cards == second
    held = sorted((h.reservation.workload, h.reservation.gpu_uuid)
                  for h in read_ledger(fresh_fleet).held)  # fmt: skip
    assert held == [("big", "GPU-0"), ("big", "GPU-2"), ("other", "GPU-1")]
