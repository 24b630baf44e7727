"""Parsing OpenAI batch files: every line is a request or exactly one problem, never a crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.batches import (
    BatchRequest,
    BatchResult,
    parse_batch_lines,
    result_from_line,
    result_line,
    still_to_run,
)

CHAT = ("/v1/chat/completions", "/v1/completions")


def line(custom_id: object = "a", **over: object) -> str:
    item: dict[str, object] = {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hi"}]},
    }
    item.update(over)
    return json.dumps(item)


def test_valid_lines_become_requests_with_their_line_numbers() -> None:
    requests, problems = parse_batch_lines([line("a"), "", line("b")], CHAT)
    assert problems == ()
    assert [(r.line_no, r.custom_id, r.url) for r in requests] == [
        (1, "a", "/v1/chat/completions"),
        (3, "b", "/v1/chat/completions"),
    ]
    assert requests[0].body == {"messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (line(None), "no custom_id"),
        (line(""), "no custom_id"),
        (line(7), "no custom_id"),
        (line("x", method="GET"), "method must be POST, not 'GET'"),
        (line("x", url="/v1/embeddings"), "url '/v1/embeddings' is not one this batch answers"),
        (line("x", body=[1]), "body must be a JSON object"),
        (line("x", body=None), "body must be a JSON object"),
    ],
)
def test_each_bad_line_is_one_problem_naming_its_line(text: str, says: str) -> None:
    requests, problems = parse_batch_lines([line("ok"), text], CHAT)
    assert [r.custom_id for r in requests] == ["ok"]
    [problem] = problems
    assert problem.line_no == 2
    assert says in problem.problem
    assert str(problem).startswith("line 2: ")


def test_a_repeated_custom_id_is_a_problem_on_its_later_lines() -> None:
    requests, problems = parse_batch_lines([line("a"), line("b"), line("a")], CHAT)
    assert [r.custom_id for r in requests] == ["a", "b"]
    assert [(p.line_no, p.problem) for p in problems] == [
        (3, "custom_id 'a' is already used on line 1")
    ]


def test_a_bad_line_does_not_claim_its_custom_id() -> None:
    requests, problems = parse_batch_lines([line("a", method="GET"), line("a")], CHAT)
    assert [r.line_no for r in requests] == [2]
    assert [p.line_no for p in problems] == [1]


def test_embeddings_answer_only_their_route() -> None:
    requests, problems = parse_batch_lines(
        [line("e", url="/v1/embeddings", body={"input": "x"}), line("c")], ("/v1/embeddings",)
    )
    assert [r.custom_id for r in requests] == ["e"]
    assert [p.line_no for p in problems] == [2]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "custom_id": st.sampled_from(["a", "b", ""]) | json_values,
        "method": st.sampled_from(["POST", "GET"]) | json_values,
        "url": st.sampled_from([*CHAT, "/v1/embeddings"]) | json_values,
        "body": st.just({}) | json_values,
    },
).map(json.dumps)


@given(st.lists(st.text(max_size=40) | request_like, max_size=12))
def test_every_line_is_a_request_or_exactly_one_problem(lines: list[str]) -> None:
    requests, problems = parse_batch_lines(lines, CHAT)
    numbered = [r.line_no for r in requests] + [p.line_no for p in problems]
    assert sorted(numbered) == [n for n, text in enumerate(lines, start=1) if text.strip()]
    ids = [r.custom_id for r in requests]
    assert len(ids) == len(set(ids))
    assert all(r.url in CHAT and isinstance(r.body, dict) for r in requests)


def test_a_result_round_trips_through_the_output_format() -> None:
    ok = BatchResult(id="r1", custom_id="a", status_code=200, body={"x": 1}, error=None)
    failed = BatchResult(id="r2", custom_id="b", status_code=None, body=None, error="refused")
    assert result_line(ok) == {
        "id": "r1",
        "custom_id": "a",
        "response": {"status_code": 200, "body": {"x": 1}},
        "error": None,
    }
    assert result_line(failed)["error"] == {"message": "refused"}
    assert result_line(failed)["response"] is None
    assert [result_from_line(result_line(r)) for r in (ok, failed)] == [ok, failed]
    assert ok.succeeded and not failed.succeeded
    assert not BatchResult(id="r", custom_id="c", status_code=500, body="", error=None).succeeded
    assert result_from_line([1]) is None
    assert result_from_line({"id": "x"}) is None


def test_a_result_line_without_an_id_or_with_a_status_that_is_no_number_is_read_as_such() -> None:
    line = {"custom_id": "a", "response": {"status_code": "200", "body": "hi"}, "error": None}
    assert result_from_line(line) == BatchResult(
        id="", custom_id="a", status_code=None, body="hi", error=None
    )


def test_requests_with_a_result_are_not_run_again() -> None:
    requests = tuple(
        BatchRequest(line_no=n, custom_id=c, url=CHAT[0], body={}) for n, c in enumerate("abc", 1)
    )
    assert [r.custom_id for r in still_to_run(requests, ["b", "zz"])] == ["a", "c"]
    assert still_to_run(requests, "abc") == ()
