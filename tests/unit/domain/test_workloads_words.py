"""A recovery delay as a person set it (domain/workloads.py ``delay_words``): the largest
whole unit, hours then minutes, seconds otherwise, written out for each edge."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodeau.domain.workloads import delay_words


@pytest.mark.parametrize(
    ("delay", "words"),
    [
        (timedelta(hours=1), "1h"),
        (timedelta(hours=2), "2h"),
        (timedelta(minutes=3), "3m"),
        (timedelta(minutes=90), "90m"),
        (timedelta(seconds=60), "1m"),
        (timedelta(seconds=90), "90s"),
        (timedelta(seconds=30), "30s"),
        (timedelta(seconds=3601), "3601s"),
    ],
)
def test_a_delay_is_written_in_its_largest_whole_unit(delay: timedelta, words: str) -> None:
    assert delay_words(delay) == words
