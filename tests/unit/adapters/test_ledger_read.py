"""The claims a controller keeps between lists (adapters/kube/ledger.py ``LedgerRead``): made
from its lookups, claim by claim, they answer as the same claims read afresh do."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.kube.claims import Held, name_of
from nodeau.adapters.kube.ledger import LedgerRead
from nodeau.domain.recording import Claim
from nodeau.domain.reservations import Reservation

AT = datetime(2026, 12, 1, tzinfo=UTC)


def held(card: int, workload: str, version: str = "1", gib: int = 1) -> Held:
    uuid = f"GPU-{card:04d}"
    return Held(
        reservation=Reservation(workload=workload, machine="m1", gpu_uuid=uuid, bytes=gib << 30),
        claim=Claim(by="c", at=AT),
        name=name_of(uuid),
        uid=f"uid-{card}",
        version=version,
    )


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["with", "without"]),
        st.integers(min_value=0, max_value=5),  # the card
        st.sampled_from(["a", "b", "c"]),  # the workload
        st.sampled_from(["1", "2"]),  # the version (a claim made again, or as assumed)
        st.integers(min_value=1, max_value=2),  # GiB
    ),
    max_size=20,
)


@given(st.lists(st.integers(min_value=0, max_value=5), unique=True, max_size=4), STEPS)
def test_claims_kept_step_by_step_answer_as_the_same_claims_read_afresh(
    first: list[int], steps: list[tuple[str, int, str, str, int]]
) -> None:
    kept = LedgerRead(held(c, "a") for c in first)
    kept.ledger()  # made once, then carried from step to step
    oracle = {h.name: h for h in kept.held}
    for what, card, workload, version, gib in steps:
        claim = held(card, workload, version, gib)
        if what == "with":
            kept = kept.with_(claim)
            oracle[claim.name] = claim
        else:
            kept = kept.without((claim,))
            oracle.pop(claim.name, None)
    fresh = LedgerRead(oracle.values())
    assert set(kept.held) == set(fresh.held)
    assert sorted(kept.ledger().reservations, key=repr) == sorted(
        fresh.ledger().reservations, key=repr
    )
    for workload in ("a", "b", "c"):
        assert set(kept.of_workload(workload)) == {
            h for h in oracle.values() if h.reservation.workload == workload
        }
        # a workload holding two cards (a leftover beside its claim) is found by either
        theirs = {h.reservation for h in oracle.values() if h.reservation.workload == workload}
        found = kept.ledger().of_workload(workload)
        assert found in theirs if theirs else found is None


def test_a_claim_made_in_place_of_its_assumed_claim_keeps_the_ledger() -> None:
    assumed = held(1, "a", version="")
    kept = LedgerRead((held(0, "b"),)).with_(assumed)
    ledger = kept.ledger()
    made = kept.with_(held(1, "a", version="7"))
    assert made.ledger() is ledger  # the same reservations: nothing made again
    assert made.of_workload("a") == (held(1, "a", version="7"),)
    assert kept.without(()) is kept
