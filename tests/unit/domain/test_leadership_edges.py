"""The Lease's rules at their edges (domain/leadership.py): a stated duration of one second
is one second, a renewal states the holder's duration now, a release writes every field it
names, a version seen again takes the record read, a negative count is refused in words."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodeau.domain.leadership import (
    LeaseRecord,
    LeaseTerms,
    Observation,
    expires_at,
    observe,
    released,
    taken,
)
from tests.unit.domain.test_leadership import EPOCH, TERMS, held


def test_a_holder_that_stated_one_second_is_gone_one_second_after_it_was_seen() -> None:
    seen = Observation(record=held("a", duration=1), version="7", since=100.0)
    assert expires_at(seen, TERMS) == 101.0


def test_a_renewal_states_the_duration_the_holder_has_now() -> None:
    before = held("a", duration=7)
    at = EPOCH + timedelta(seconds=30)
    after = taken(before, "a", at, LeaseTerms(duration_s=20, renew_deadline_s=10))
    assert (after.holder, after.duration_s, after.renewed_at) == ("a", 20, at)


def test_a_release_names_no_holder_one_second_and_when_it_let_go() -> None:
    at = EPOCH + timedelta(seconds=45)
    before = LeaseRecord(
        holder="a", duration_s=15, acquired_at=EPOCH, renewed_at=EPOCH, transitions=3
    )
    assert released(before, at) == LeaseRecord(
        holder=None, duration_s=1, acquired_at=at, renewed_at=at, transitions=3
    )


def test_a_version_seen_again_keeps_its_moment_and_takes_the_record_read() -> None:
    first = observe(None, held("a"), "7", now=10.0)
    again = observe(first, held("b"), "7", now=20.0)
    assert (again.record, again.since) == (held("b"), 10.0)


def test_a_negative_count_of_transitions_is_refused_in_these_words() -> None:
    with pytest.raises(ValueError, match=r"^a lease's transitions cannot be negative, got -1$"):
        LeaseRecord(holder=None, duration_s=None, transitions=-1)
