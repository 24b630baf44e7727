"""The tokens ``/metrics`` counts are what an answer's ``usage`` says, and nothing else:
a plain JSON answer, a stream's last event that has one; any other bytes count nothing
and never raise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.apps.endpoint.metrics import reported_usage

PLAIN = b'{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}'
STREAM = (
    b'data: {"choices": [{"delta": {"content": "a"}}], "usage": null}\n\n'
    b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}\n\n'
    b"data: [DONE]\n\n"
)


def test_a_plain_answer_reports_its_usage() -> None:
    assert reported_usage(PLAIN, streamed=False) == {"prompt": 7, "completion": 3}


def test_a_stream_reports_its_last_usage() -> None:
    assert reported_usage(STREAM, streamed=True) == {"prompt": 5, "completion": 2}


@pytest.mark.parametrize(
    "body",
    [
        b'{"usage": {"prompt_tokens": -1, "completion_tokens": true}}',
        b'{"usage": {"prompt_tokens": "7"}}',
        b'{"usage": []}',
        b'["usage"]',
        b'{"usage": ',
        b'{"usage": ' + b"[" * 100_000,
        b"[" * 100_000 + b'"usage"',
    ],
)
def test_usage_that_is_not_counts_counts_nothing(body: bytes) -> None:
    assert reported_usage(body, streamed=False) == {}


@given(st.binary(max_size=300), st.booleans())
def test_any_bytes_count_nothing_or_counts_and_never_raise(body: bytes, streamed: bool) -> None:
    found = reported_usage(body, streamed)
    assert set(found) <= {"prompt", "completion"}
    assert all(isinstance(v, int) and v >= 0 for v in found.values())
