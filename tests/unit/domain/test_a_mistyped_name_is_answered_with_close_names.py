"""A model name that matches nothing is answered with the names close to it, by one rule."""

from __future__ import annotations

import pytest

from nodeau.domain.resolution import (
    Known,
    Miss,
    Unresolved,
    close_names,
    did_you_mean,
    resolve_name,
)

NAMES = ("smollm2-135m-instruct-q4_1", "qwen3-4b-q4", "qwen3-8b-q4", "mine")


@pytest.mark.parametrize(
    ("typed", "close"),
    [
        ("qwen", ("qwen3-4b-q4", "qwen3-8b-q4")),  # a fragment: every name containing it
        ("QWEN3-8B", ("qwen3-8b-q4",)),  # in any case
        ("smolm2-135m-instruct-q4_1", ("smollm2-135m-instruct-q4_1",)),  # a typo: difflib
        ("mnie", ("mine",)),
        ("mistral", ()),
        ("", ()),
    ],
)
def test_close_names(typed: str, close: tuple[str, ...]) -> None:
    assert close_names(typed, NAMES) == close


def test_a_typo_is_suggested_at_most_three_times_and_each_name_once() -> None:
    names = [f"model-{i}" for i in range(10)] * 2
    close = close_names("modle-1", names)
    assert 1 <= len(close) <= 3
    assert len(set(close)) == len(close)


def test_the_hint_reads_as_a_question_or_not_at_all() -> None:
    assert did_you_mean("mnie", NAMES) == "; did you mean mine?"
    assert did_you_mean("zzzz", NAMES) == ""


def test_resolving_an_unknown_name_suggests_the_known_ones() -> None:
    known = [Known(artifact_id="a" * 64, names=("mine",)), Known(artifact_id="b" * 64)]
    assert resolve_name("mnie", known) == Unresolved(
        miss=Miss.UNKNOWN,
        sentence="mnie: no alias, catalog model or artifact id (at least 6 hex digits) matches"
        "; did you mean mine?",
    )
