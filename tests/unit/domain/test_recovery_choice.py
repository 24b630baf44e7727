"""A service's recovery choice changed: the sentence ``nodeau recovery set`` prints."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.recovery_choice import recovery_change
from nodeau.domain.workloads import RecoveryMode, WorkloadKind

NEVER, AUTO = RecoveryMode.NEVER, RecoveryMode.AUTOMATIC
SERVICE = WorkloadKind.SERVICE
M = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("was", "now", "said"),
    [
        (
            (NEVER, 3 * M),
            (AUTO, 10 * M),
            "chat: recovery is now automatic after 10m (was never); nothing restarts",
        ),
        (
            (AUTO, 3 * M),
            (AUTO, 10 * M),
            "chat: recovery is now automatic after 10m (was automatic after 3m); nothing restarts",
        ),
        (
            (AUTO, 3 * M),
            (NEVER, 3 * M),
            "chat: recovery is now never (was automatic after 3m); nothing restarts",
        ),
        (
            (AUTO, 3 * M),
            (AUTO, 180 * timedelta(seconds=1)),
            "chat: recovery is already automatic after 3m; nothing changed",
        ),
        (
            (NEVER, 3 * M),
            (NEVER, 10 * M),
            "chat: recovery is already never; nothing changed",
        ),  # never is never, whatever delay is kept
    ],
)
def test_the_sentence_says_what_changed_and_that_nothing_restarts(
    was: tuple[RecoveryMode, timedelta], now: tuple[RecoveryMode, timedelta], said: str
) -> None:
    change = recovery_change("chat", SERVICE, was, now)
    assert change.changed is said.endswith("nothing restarts")
    assert change.sentence == said


@given(
    was=st.tuples(st.sampled_from(RecoveryMode), st.integers(1, 86400)),
    now=st.tuples(st.sampled_from(RecoveryMode), st.integers(1, 86400)),
)
def test_a_change_is_a_change_exactly_when_a_person_would_read_another_choice(
    was: tuple[RecoveryMode, int], now: tuple[RecoveryMode, int]
) -> None:
    before = (was[0], timedelta(seconds=was[1]))
    after = (now[0], timedelta(seconds=now[1]))
    change = recovery_change("chat", SERVICE, before, after)
    # the oracle, written from the product's rule rather than with recovery_words: a person
    # reads another choice when the mode differs, or when both recover automatically after
    # a different number of seconds (a delay of "never" is not read at all)
    differs = was[0] is not now[0] or (was[0] is AUTO and was[1] != now[1])
    assert change.changed is differs
    assert change.sentence.endswith("nothing restarts" if change.changed else "nothing changed")


def test_a_batch_job_has_no_recovery_to_choose() -> None:
    with pytest.raises(
        ValueError, match="recovery applies to served workloads; nightly is a batch"
    ):
        recovery_change("nightly", WorkloadKind.BATCH, (NEVER, 3 * M), (AUTO, 3 * M))


def test_a_delay_is_positive() -> None:
    with pytest.raises(ValueError, match="a recovery delay is positive"):
        recovery_change("chat", SERVICE, (NEVER, 3 * M), (AUTO, timedelta(0)))
