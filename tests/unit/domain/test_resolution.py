"""One rule for which artifact a model name means, on every plane."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.resolution import (
    Candidate,
    Known,
    Miss,
    Resolution,
    Unresolved,
    chosen_workloads,
    display_name,
    id_prefix,
    names_served,
    resolve_name,
)

A = "ab" * 32
B = "abcdef" + "0" * 58
C = "c" * 64


def test_a_name_wins_over_an_id_prefix_it_happens_to_match() -> None:
    known = [Known(artifact_id=A, names=("abcdef",)), Known(artifact_id=B)]
    assert resolve_name("abcdef", known) == Resolution(artifact_id=A, names=("abcdef",), where=())


@pytest.mark.parametrize("text", [A, "sha256:" + A, A[:6].upper(), "sha256:ababab"])
def test_an_id_or_a_prefix_of_six_or_more_hex_digits(text: str) -> None:
    known = [Known(artifact_id=A, names=("chat",)), Known(artifact_id=C)]
    assert resolve_name(text, known) == Resolution(artifact_id=A, names=("chat",), where=())


def test_a_prefix_shorter_than_six_digits_is_no_id() -> None:
    assert resolve_name("ababa", [Known(artifact_id=A)]) == Unresolved(
        miss=Miss.UNKNOWN,
        sentence="ababa: no alias, catalog model or artifact id (at least 6 hex digits) matches",
    )


def test_two_artifacts_under_one_name_are_ambiguous_and_named_with_their_machines() -> None:
    known = [
        Known(artifact_id=A, names=("chat",), where="garage"),
        Known(artifact_id=C, names=("chat",), where="attic"),
    ]
    assert resolve_name("chat", known) == Unresolved(
        miss=Miss.AMBIGUOUS,
        sentence="chat names 2 different artifacts (abababababab on garage; cccccccccccc on "
        "attic); ask for one by its SHA-256 prefix",
    )


def test_a_prefix_matching_two_artifacts_is_ambiguous() -> None:
    known = [Known(artifact_id=B), Known(artifact_id="abcdef" + "1" * 58)]
    found = resolve_name("abcdef", known)
    assert isinstance(found, Unresolved)
    assert found.miss is Miss.AMBIGUOUS


def test_every_name_and_machine_of_the_one_artifact_is_gathered() -> None:
    known = [
        Known(artifact_id=A, names=("chat",), where="garage"),
        Known(artifact_id=A, names=("qwen", "chat"), where="attic"),
        Known(artifact_id=C, names=("other",), where="attic"),
    ]
    assert resolve_name("qwen", known) == Resolution(
        artifact_id=A, names=("chat", "qwen"), where=("attic", "garage")
    )


@pytest.mark.parametrize(
    ("asked", "names", "shown"),
    [
        ("qwen", ("chat", "qwen"), "qwen"),
        ("abababab", ("chat", "qwen"), "chat"),
        (None, ("chat",), "chat"),
        ("abababab", (), "abababababab"),
    ],
)
def test_display_name(asked: str | None, names: tuple[str, ...], shown: str) -> None:
    assert display_name(asked, names, A) == shown


@given(st.text(max_size=80))
def test_id_prefix_is_hex_of_six_or_more_or_nothing(text: str) -> None:
    prefix = id_prefix(text)
    stripped = text.lower().removeprefix("sha256:")
    if prefix is None:
        assert len(stripped) < 6 or not all(c in "0123456789abcdef" for c in stripped)
    else:
        assert prefix == stripped
        assert len(prefix) >= 6
        assert set(prefix) <= set("0123456789abcdef")


@pytest.mark.parametrize("asked", ["tiny", "chatbot", A, A.upper(), "sha256:" + A, A[:6]])
def test_a_served_model_answers_to_its_names_its_id_and_an_id_prefix(asked: str) -> None:
    assert names_served(asked, ("chatbot", "tiny"), A)


@pytest.mark.parametrize("asked", ["gpt-4o", "TINY", "", A[:5], A[1:8], B, "sha256:"])
def test_a_served_model_refuses_any_other_name(asked: str) -> None:
    assert not names_served(asked, ("chatbot", "tiny"), A)


def test_a_served_model_with_no_known_id_answers_to_its_names_only() -> None:
    assert names_served("tiny", ("tiny",), "")
    assert not names_served("abcdef", ("tiny",), "")


GATEWAY = [
    Candidate(workload="chat", names=("tiny", "smol"), artifact_id=A),
    Candidate(workload="chat-b", names=("tiny",), artifact_id=A),
    Candidate(workload="embed", names=("minilm",), artifact_id=C),
]


@pytest.mark.parametrize(
    ("asked", "chosen"),
    [
        ("chat", {"chat"}),  # a workload's own name first, though its model is "tiny" too
        ("smol", {"chat"}),
        ("minilm", {"embed"}),
        (C[:8], {"embed"}),
        ("tiny", {"chat", "chat-b"}),  # ambiguous: the caller names one
        (A[:6], {"chat", "chat-b"}),
        ("gpt-4o", set()),
    ],
)
def test_the_gateway_chooses_the_workload_a_model_names(asked: str, chosen: set[str]) -> None:
    assert chosen_workloads(asked, GATEWAY) == chosen


@given(st.text(max_size=12))
def test_a_workload_named_exactly_is_always_the_only_choice(asked: str) -> None:
    candidates = [*GATEWAY, Candidate(workload=asked, names=("tiny",), artifact_id=A)]
    assert chosen_workloads(asked, candidates) == {asked}


def test_a_workload_named_as_asked_is_chosen_over_one_whose_model_goes_by_that_name() -> None:
    candidates = [
        Candidate(workload="tiny", names=("smol",), artifact_id=C),
        Candidate(workload="chat", names=("tiny",), artifact_id=A),
    ]
    assert chosen_workloads("tiny", candidates) == {"tiny"}
