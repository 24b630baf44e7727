"""Leftovers, claims and recorded cards: the rules a store with two writes keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodeau.domain.recording import Backing, Claim, in_flight, leftovers
from nodeau.domain.reservations import Reservation

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHAT = Reservation(workload="chat", machine="m1", gpu_uuid="GPU-1", bytes=1024)
EMBED = Reservation(workload="embed", machine="m1", gpu_uuid="GPU-2", bytes=2048)


def test_a_reservation_its_record_holds_is_backed() -> None:
    assert leftovers((CHAT,), (Backing(workload="chat", holds=CHAT),)) == frozenset()


@pytest.mark.parametrize(
    "backing",
    [
        Backing(workload="chat", holds=None),  # nothing recorded, or finished
        Backing(workload="chat", holds=EMBED),  # another card recorded
        Backing(workload="embed", holds=CHAT),  # someone else's record
    ],
)
def test_any_other_reservation_is_a_leftover(backing: Backing) -> None:
    assert leftovers((CHAT,), (backing,)) == frozenset({"chat"})


def test_no_record_at_all_leaves_every_reservation_a_leftover() -> None:
    assert leftovers((CHAT, EMBED), ()) == frozenset({"chat", "embed"})


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (None, False),
        (Claim(by="controller-b", at=NOW - timedelta(seconds=30)), True),
        (Claim(by="controller-b", at=NOW - timedelta(seconds=119)), True),
        (Claim(by="controller-b", at=NOW - timedelta(minutes=2)), False),  # stale: a leftover
        (Claim(by="controller-a", at=NOW - timedelta(seconds=1)), False),  # our own claim
    ],
)
def test_a_fresh_claim_of_another_writer_is_an_admission_in_flight(
    claim: Claim | None, expected: bool
) -> None:
    assert in_flight(claim, "controller-a", NOW) is expected
