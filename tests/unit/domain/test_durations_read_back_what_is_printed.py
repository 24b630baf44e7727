"""Every duration flag reads one grammar: what the product prints, read back; junk refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.durations import LONGEST, BadDuration, parse_duration
from nodeau.domain.workloads import delay_words

FORMS = "give whole numbers with d, h, m or s, largest first (e.g. 90s, 3m, 1h30m, 2d)"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400),
        ("90s", 90),
        ("2d", 172800),
        ("3m", 180),
        ("1h", 3600),
        ("1d12h", 129600),
        ("2h0m5s", 7205),
        (" 10m ", 600),
        ("3650d", 3650 * 86400),
    ],
)
def test_the_forms_people_type(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    ["3x", "", " ", "24", "1.5h", "-1h", "+1h", "h", "30m1h", "1h1h", "1H", "1 h", "²m", "1h 30m"],
)
def test_junk_is_refused_saying_which_forms_are_accepted(text: str) -> None:
    with pytest.raises(BadDuration) as refused:
        parse_duration(text)
    assert str(refused.value) == f"{text!r} is not a duration: {FORMS}"


@pytest.mark.parametrize("text", ["0s", "0m", "0d0h0m0s"])
def test_no_time_at_all_is_refused(text: str) -> None:
    with pytest.raises(BadDuration, match="is no time at all"):
        parse_duration(text)


def test_past_ten_years_is_a_typo() -> None:
    with pytest.raises(BadDuration, match="longer than 3650d"):
        parse_duration("3651d")
    with pytest.raises(BadDuration, match="longer than 3650d"):
        parse_duration("9999999d")


@given(st.integers(min_value=1, max_value=int(LONGEST.total_seconds())))
def test_every_delay_the_product_prints_reads_back_as_itself(seconds: int) -> None:
    delay = timedelta(seconds=seconds)
    assert parse_duration(delay_words(delay)) == delay


@given(st.integers(0, 3000), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), st.data())
def test_any_units_largest_first_add_up(
    d: int, h: int, m: int, s: int, data: st.DataObject
) -> None:
    parts = [(d, "d"), (h, "h"), (m, "m"), (s, "s")]
    kept = [p for p in parts if data.draw(st.booleans())]
    text = "".join(f"{n}{unit}" for n, unit in kept)
    total = sum(n * {"d": 86400, "h": 3600, "m": 60, "s": 1}[unit] for n, unit in kept)
    if total == 0:
        with pytest.raises(BadDuration):
            parse_duration(text)
    else:
        assert parse_duration(text) == timedelta(seconds=total)


@given(st.text(max_size=40))
def test_any_text_is_a_positive_duration_or_the_documented_error(text: str) -> None:
    try:
        found = parse_duration(text)
    except BadDuration as refused:
        assert repr(text) in str(refused)
    else:
        assert timedelta(0) < found <= LONGEST


@given(st.text(alphabet="0123456789dhms.- ", max_size=30))
def test_text_made_of_duration_characters_is_a_duration_or_the_documented_error(
    text: str,
) -> None:
    try:
        found = parse_duration(text)
    except BadDuration:
        return
    assert timedelta(0) < found <= LONGEST
    assert parse_duration(delay_words(found)) == found
