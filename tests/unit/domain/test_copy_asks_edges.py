"""A recovery's copy asks when requests and needs come several at a time: a person's ask
before a recovery's on the same request does not stop the recovery's being taken back, and
a service that needs no copy does not stop the next one from asking."""

from __future__ import annotations

from nodeau.domain.recovery import copy_asks
from tests.unit.domain.test_recovery import ART, asked, need


def test_a_recovery_ask_after_a_persons_on_the_same_copy_is_still_taken_back() -> None:
    both = asked(("attic", ART, "person"), ("attic", ART, "recovery:gone"))
    assert [a.asker for a in both[0].askers] == ["person", "recovery:gone"]
    asks = copy_asks([], both, lambda _n: "attic")
    assert (asks.add, asks.withdraw) == ((), (("attic", ART, "recovery:gone"),))


def test_a_service_that_needs_no_copy_does_not_stop_the_next_from_asking() -> None:
    covered = need(workload="first", verified_on=frozenset({"shed"}))  # a copy where it fits
    uncovered = need(workload="second")
    asks = copy_asks([covered, uncovered], (), lambda _n: "attic")
    assert asks.add == (("attic", ART, "qwen", "recovery:second"),)
