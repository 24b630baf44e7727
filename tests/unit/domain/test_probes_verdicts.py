"""Each probe's verdict written out whole (domain/probes/): for a challenge built by hand,
every failure and every pass gives the exact capability, question, evidence and reason a
person reads in the qualification record, and the readers of a reply (embeddings, tool
calls, the token-limit cut) answer exactly at their edges."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest

from nodeau.domain.probes import judge
from nodeau.domain.probes.bank import PARAPHRASES
from nodeau.domain.probes.chat import ChatExpected, judge_chat
from nodeau.domain.probes.common import (
    Challenge,
    Exchange,
    ProbeRequest,
    chat_message,
    message_text,
    shown,
)
from nodeau.domain.probes.embed import EmbedExpected, cosine, embed_challenge, judge_embed, vectors
from nodeau.domain.probes.rerank import RerankExpected, judge_rerank, scores
from nodeau.domain.probes.structured import (
    StructuredExpected,
    finished_by_length,
    judge_structured,
    key_name,
)
from nodeau.domain.probes.tools import ToolsExpected, call_problem, judge_tools, tool_calls
from nodeau.domain.probes.vision import VisionExpected, judge_vision
from nodeau.domain.qualification import Capability, ProbeOutcome, ProbeResult

PASSED, FAILED = ProbeOutcome.PASSED, ProbeOutcome.FAILED


def chat(content: object) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


def result(capability: Capability, outcome: ProbeOutcome, answered: str, why: str) -> ProbeResult:
    return ProbeResult(
        capability=capability, outcome=outcome, asked="the question", answered=answered, why=why
    )


# --- chat ------------------------------------------------------------------------------

CHAT = Challenge(
    capability=Capability.CHAT,
    asked="the question",
    requests=(),
    expected=ChatExpected(
        instructions=("Say the word kettle.", "Say the word lantern."),
        words=("kettle", "lantern"),
    ),
)


@pytest.mark.parametrize(
    ("bodies", "answered", "why"),
    [
        (({"error": "down"}, chat("x")), '{"error":"down"}', "the reply is not a chat completion"),
        ((chat("  "), chat("lantern")), "", "the reply to 'Say the word kettle.' is empty"),
        (
            (chat("kettle"), chat("OK: say the word  LANTERN.")),
            "kettle / OK: say the word LANTERN.",
            "the reply echoes the instruction 'Say the word lantern.'",
        ),
        (
            (chat("kettle"), chat("lanterns")),
            "kettle / lanterns",
            "the reply to 'Say the word lantern.' does not say 'lantern'",
        ),
    ],
)
def test_a_chat_failure_names_the_round_and_shows_every_reply_so_far(
    bodies: tuple[object, ...], answered: str, why: str
) -> None:
    assert judge_chat(CHAT, bodies) == result(Capability.CHAT, FAILED, answered, why)


def test_a_chat_pass_names_every_word() -> None:
    assert judge_chat(CHAT, (chat("Kettle!"), chat("a lantern"))) == result(
        Capability.CHAT,
        PASSED,
        "Kettle! / a lantern",
        "every reply said its word ('kettle', 'lantern')",
    )


def test_a_chat_judge_refuses_fewer_replies_than_rounds() -> None:
    with pytest.raises(ValueError, match="zip"):
        judge_chat(CHAT, (chat("kettle"),))


# --- vision ----------------------------------------------------------------------------

VISION = Challenge(
    capability=Capability.VISION_INPUT,
    asked="the question",
    requests=(),
    expected=VisionExpected(colours=("red", "blue")),
)


@pytest.mark.parametrize(
    ("bodies", "answered", "why"),
    [
        (([], chat("blue")), "[]", "the reply is not a chat completion"),
        (
            (chat("Red."), chat("a square")),
            "Red. / a square",
            "the blue image was answered with no colour",
        ),
        (
            (chat("red"), chat("green or blue, maybe red")),
            "red / green or blue, maybe red",
            "the blue image was answered with blue, green, red",
        ),
    ],
)
def test_a_vision_failure_says_which_colours_an_image_was_answered_with(
    bodies: tuple[object, ...], answered: str, why: str
) -> None:
    assert judge_vision(VISION, bodies) == result(Capability.VISION_INPUT, FAILED, answered, why)


def test_a_vision_pass_shows_every_reply() -> None:
    assert judge_vision(VISION, (chat("It is red."), chat("BLUE"))) == result(
        Capability.VISION_INPUT,
        PASSED,
        "It is red. / BLUE",
        "every image's colour was named, and only it",
    )


def test_a_vision_judge_refuses_fewer_replies_than_images() -> None:
    with pytest.raises(ValueError, match="zip"):
        judge_vision(VISION, (chat("red"),))


# --- embed -----------------------------------------------------------------------------


def embedded(*vecs: list[float]) -> dict[str, Any]:
    return {"data": [{"index": i, "embedding": v} for i, v in enumerate(vecs)]}


def embed_case(texts: tuple[str, ...], pairs: tuple[tuple[int, int], ...]) -> Challenge:
    return Challenge(
        capability=Capability.EMBED,
        asked="the question",
        requests=(),
        expected=EmbedExpected(texts=texts, pairs=pairs),
    )


THREE = embed_case(("cat", "kitten", "tax"), ((0, 1),))
FIVE = embed_case(("cat", "kitten", "car", "auto", "tax"), ((0, 1), (2, 3)))


def test_an_unusable_embeddings_reply_is_shown_as_evidence() -> None:
    assert judge_embed(THREE, ({"data": []},)) == result(
        Capability.EMBED,
        FAILED,
        '{"data":[]}',
        "the reply is not usable: expected 3 embeddings under 'data'",
    )


def test_a_zero_embedding_fails_with_its_dimension() -> None:
    body = embedded([1.0, 0.0], [0.0, 0.0], [0.0, 1.0])
    assert judge_embed(THREE, (body,)) == result(
        Capability.EMBED, FAILED, "dimension 2", "an embedding is the zero vector"
    )


def test_a_paraphrase_nearer_by_exactly_the_margin_passes() -> None:
    # cosines 0.1 and 0.05 exactly: 0.1 - 0.05 == MARGIN in floating point
    paraphrase = [0.1, math.sqrt(1 - 0.1 * 0.1)]
    other = [0.05, -math.sqrt(1 - 0.05 * 0.05)]
    assert cosine([1.0, 0.0], paraphrase) - cosine([1.0, 0.0], other) == 0.05  # type: ignore[operator]
    assert judge_embed(THREE, (embedded([1.0, 0.0], paraphrase, other),)) == result(
        Capability.EMBED,
        PASSED,
        "'cat': paraphrase 0.100, next 0.050",
        "every statement is nearest its paraphrase by at least 0.05 cosine",
    )


def test_an_orthogonal_paraphrase_counts_as_zero_not_as_missing() -> None:
    body = embedded([1.0, 0.0], [0.0, 1.0], [-1.0, 0.0])
    assert judge_embed(THREE, (body,)) == result(
        Capability.EMBED,
        PASSED,
        "'cat': paraphrase 0.000, next -1.000",
        "every statement is nearest its paraphrase by at least 0.05 cosine",
    )


def test_the_second_pair_failing_shows_both_lines_and_names_the_statement() -> None:
    body = embedded(
        [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]
    )
    assert judge_embed(FIVE, (body,)) == result(
        Capability.EMBED,
        FAILED,
        "'cat': paraphrase 1.000, next 0.000; 'car': paraphrase 0.000, next 1.000",
        "'car' is 0.000 from its paraphrase and 1.000 from an unrelated sentence: "
        "not nearer by 0.05",
    )


def test_every_pair_passing_shows_every_line() -> None:
    body = embedded(
        [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    )
    assert judge_embed(FIVE, (body,)) == result(
        Capability.EMBED,
        PASSED,
        "'cat': paraphrase 1.000, next 0.000; 'car': paraphrase 1.000, next 0.000",
        "every statement is nearest its paraphrase by at least 0.05 cosine",
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([1, 2], "an entry has no index or no embedding"),
        (
            [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}],
            "an entry has no index or no embedding",
        ),
        (
            [{"embedding": [1.0]}, {"index": 1, "embedding": [1.0]}],
            "an entry has no index or no embedding",
        ),
        (
            [{"index": 0, "embedding": [math.nan]}, {"index": 1, "embedding": [1.0]}],
            "an embedding holds something other than finite numbers",
        ),
        (
            [{"index": 0, "embedding": ["1"]}, {"index": 1, "embedding": [1.0]}],
            "an embedding holds something other than finite numbers",
        ),
        (
            [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}],
            "the embeddings' indexes are not one per input",
        ),
        (
            [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}],
            "the embeddings differ in length",
        ),
    ],
)
def test_an_embeddings_reply_says_what_is_wrong_with_it(data: list[object], problem: str) -> None:
    assert vectors({"data": data}, 2) == problem


def test_cosine_refuses_vectors_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="zip"):
        cosine([1.0, 0.0], [1.0, 0.0, 0.0])


# --- tools -----------------------------------------------------------------------------

TOOLS = ToolsExpected(
    function="get_weather_abc",
    schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    values={"city": "Oslo"},
)


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("get_weather_abc", "a tool call has no function"),
        ({"type": "function"}, "a tool call has no function"),
        (
            {"function": {"name": "get_weather_abc", "arguments": {"city": "Oslo"}}},
            "the call's arguments are not a JSON string",
        ),
        (
            {"function": {"name": "get_weather_abc", "arguments": "{" + "x" * 100}},
            "the call's arguments are not JSON: '{" + "x" * 79 + "'",
        ),
    ],
)
def test_a_tool_call_says_what_is_wrong_with_it(call: object, problem: str) -> None:
    assert call_problem(call, TOOLS) == problem


@pytest.mark.parametrize("calls", [None, "get_weather_abc", {"0": {}}])
def test_tool_calls_that_are_not_a_list_are_none(calls: object) -> None:
    assert tool_calls({"role": "assistant", "tool_calls": calls}) == []


# --- the readers of a chat reply --------------------------------------------------------


@pytest.mark.parametrize("message", [{"content": None}, {"content": ["a"]}, {}])
def test_a_message_without_text_content_reads_as_empty(message: dict[str, Any]) -> None:
    assert message_text(message) == ""


@pytest.mark.parametrize(
    ("body", "cut"),
    [
        ({"choices": [{"finish_reason": "length", "message": {}}]}, True),
        ({"choices": [{"finish_reason": "stop", "message": {}}]}, False),
        ({"choices": [{"message": {}}]}, False),
        ({"choices": []}, False),
        ({"choices": {"finish_reason": "length"}}, False),
        ({"choices": ["length"]}, False),
        ({}, False),
        ("length", False),
        (None, False),
    ],
)
def test_a_reply_was_cut_at_the_token_limit_only_when_its_first_choice_says_length(
    body: object, cut: bool
) -> None:
    assert finished_by_length(body) is cut


# --- structured output -----------------------------------------------------------------

STRUCTURED = Challenge(
    capability=Capability.STRUCTURED_OUTPUT,
    asked="the question",
    requests=(),
    expected=StructuredExpected(
        schema={
            "type": "object",
            "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["city", "year"],
        },
        values={"city": "Oslo", "year": 1624},
    ),
)


def finished(content: str, reason: str) -> dict[str, Any]:
    return {"choices": [{"message": {"content": content}, "finish_reason": reason}]}


@pytest.mark.parametrize(
    ("body", "answered", "why"),
    [
        ({"choices": []}, '{"choices":[]}', "the reply is not a chat completion"),
        (
            finished('{"city": "Os', "length"),
            '{"city": "Os',
            "the reply is not the JSON response_format asks for "
            "(it was cut off at the token limit)",
        ),
        (
            finished('{"city": "Os', "stop"),
            '{"city": "Os',
            "the reply is not the JSON response_format asks for",
        ),
        (
            finished('{"city": "Oslo"}', "stop"),
            '{"city": "Oslo"}',
            "the JSON does not fit the schema: 'year' is a required property",
        ),
        (
            finished('{"city": "Bergen", "year": 1624}', "stop"),
            '{"city": "Bergen", "year": 1624}',
            "city is 'Bergen', not 'Oslo'",
        ),
    ],
)
def test_a_structured_output_failure_says_what_is_wrong(
    body: object, answered: str, why: str
) -> None:
    assert judge_structured(STRUCTURED, (body,)) == result(
        Capability.STRUCTURED_OUTPUT, FAILED, answered, why
    )


def test_a_structured_output_pass_shows_the_json() -> None:
    body = finished('{"city": "Oslo", "year": 1624}', "stop")
    assert judge_structured(STRUCTURED, (body,)) == result(
        Capability.STRUCTURED_OUTPUT,
        PASSED,
        '{"city": "Oslo", "year": 1624}',
        "the JSON fits the schema and holds the values asked for",
    )


# --- the verdict on what came back, before any capability's judge ------------------------

TWO_ROUNDS = Challenge(
    capability=Capability.CHAT,
    asked="the question",
    requests=(
        ProbeRequest(route="/v1/chat/completions", body={"n": 1}),
        ProbeRequest(route="/v1/chat/completions", body={"n": 2}),
    ),
    expected=CHAT.expected,
)


def test_a_request_with_trouble_fails_the_probe_naming_its_number() -> None:
    trouble = "HTTP 500: " + "x" * 200
    exchanges = (Exchange.answered(chat("kettle")), Exchange.failed(trouble))
    assert judge(TWO_ROUNDS, exchanges) == result(
        Capability.CHAT,
        FAILED,
        trouble,
        "request 2 of 2 got no usable answer: HTTP 500: " + "x" * 149 + "…",
    )


def test_a_missing_answer_fails_the_probe_saying_how_many_came_back() -> None:
    assert judge(TWO_ROUNDS, (Exchange.answered(chat("kettle")),)) == result(
        Capability.CHAT, FAILED, "", "1 answers came back for 2 requests"
    )


def test_a_judge_given_another_capabilitys_challenge_says_so() -> None:
    with pytest.raises(TypeError) as raised:
        judge_chat(VISION, (chat("red"), chat("blue")))
    assert str(raised.value) == (
        "a vision-input challenge expects <class 'nodeau.domain.probes.vision.VisionExpected'>"
    )


@pytest.mark.parametrize(
    ("body", "evidence"),
    [
        ({"a": "é", "b": [1, 2]}, '{"a":"é","b":[1,2]}'),
        ({1, 2}, "{1, 2}"),
    ],
)
def test_a_body_is_shown_as_compact_json_or_else_as_python_writes_it(
    body: object, evidence: str
) -> None:
    assert shown(body) == evidence


def test_a_message_that_is_not_an_object_is_no_chat_message() -> None:
    assert chat_message({"choices": [{"message": "hi"}]}) is None


# --- rerank ----------------------------------------------------------------------------

RERANK = Challenge(
    capability=Capability.RERANK,
    asked="the question",
    requests=(),
    expected=RerankExpected(questions=("Who?", "Where?"), relevant=(1, 0), documents=2),
)


def test_an_unusable_rerank_reply_is_shown_as_evidence() -> None:
    assert judge_rerank(RERANK, ({"results": None}, {"results": []})) == result(
        Capability.RERANK,
        FAILED,
        '{"results":null}',
        "the reply is not usable: no 'results' list",
    )


def test_a_rerank_judge_refuses_fewer_replies_than_rounds() -> None:
    body = {"results": [{"index": 0, "relevance_score": 0.1}, {"index": 1, "relevance_score": 0.9}]}
    with pytest.raises(ValueError, match="zip"):
        judge_rerank(RERANK, (body,))


# --- the embed challenge ---------------------------------------------------------------


def test_an_embed_challenge_pairs_each_statement_with_its_own_paraphrase() -> None:
    bank = {(p.statement, p.paraphrase) for p in PARAPHRASES}
    for seed in range(20):
        challenge = embed_challenge(random.Random(seed), "m")
        expected = challenge.expected
        assert isinstance(expected, EmbedExpected)
        assert challenge.requests == (
            ProbeRequest(
                route="/v1/embeddings", body={"model": "m", "input": list(expected.texts)}
            ),
        )
        pairs = [(expected.texts[s], expected.texts[p]) for s, p in expected.pairs]
        assert len(pairs) == 3
        assert all(pair in bank for pair in pairs)
        statements = [statement for statement, _ in pairs]
        assert challenge.asked == (
            f"embed: among 9 shuffled sentences, each of {statements[0]!r}, {statements[1]!r}, "
            f"{statements[2]!r} must be nearest its paraphrase by 0.05 cosine"
        )


def test_an_embed_challenge_sends_its_texts_as_the_input() -> None:
    challenge = embed_challenge(random.Random(3), "m")
    expected = challenge.expected
    assert isinstance(expected, EmbedExpected)
    (sent,) = challenge.requests
    assert dict(sent.body) == {"model": "m", "input": list(expected.texts)}
    assert all(text for text in expected.texts)


# --- tools verdicts ----------------------------------------------------------------------

TOOLS_CHALLENGE = Challenge(
    capability=Capability.TOOLS, asked="the question", requests=(), expected=TOOLS
)
RIGHT = {"function": {"name": "get_weather_abc", "arguments": '{"city": "Oslo"}'}}


def calling(*calls: object, content: object = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return {"choices": [{"message": message}]}


@pytest.mark.parametrize(
    ("bodies", "answered", "why"),
    [
        (
            (calling(RIGHT), None),
            '[{"choices":[{"message":{"role":"assistant","content":null,'
            '"tool_calls":[{"function":{"name":"get_weather_abc","arguments":"{\\"city\\": '
            '\\"Oslo\\"}"}}]}}]},null]',
            "a reply is not a chat completion",
        ),
        (
            (calling(content="get_weather_abc(city='Oslo')"), calling(content="hi")),
            "get_weather_abc(city='Oslo')",
            "no tool_calls came back; the content names the function as text instead",
        ),
        (
            (calling(content="It is sunny."), calling(content="hi")),
            "It is sunny.",
            "no tool call came back for the relevant request",
        ),
        (
            (calling({"function": {"name": "other", "arguments": "{}"}}), calling(content="hi")),
            '{"tool_calls":[{"function":{"name":"other","arguments":"{}"}}]}',
            "it called 'other', not 'get_weather_abc'",
        ),
        (
            (calling(RIGHT), calling(RIGHT)),
            '{"tool_calls":[{"function":{"name":"get_weather_abc","arguments":"{\\"city\\": '
            '\\"Oslo\\"}"}}]} / {"tool_calls":[{"function":{"name":"get_weather_abc",'
            '"arguments":"{\\"city\\": \\"Oslo\\"}"}}]}',
            "a tool was called for a request no tool answers",
        ),
    ],
)
def test_a_tools_failure_says_what_came_back_and_why(
    bodies: tuple[object, ...], answered: str, why: str
) -> None:
    assert judge_tools(TOOLS_CHALLENGE, bodies) == result(Capability.TOOLS, FAILED, answered, why)


def test_a_tools_pass_shows_the_call_and_the_plain_answer() -> None:
    assert judge_tools(TOOLS_CHALLENGE, (calling(RIGHT), calling(content="Hello."))) == result(
        Capability.TOOLS,
        PASSED,
        '{"tool_calls":[{"function":{"name":"get_weather_abc","arguments":"{\\"city\\": '
        '\\"Oslo\\"}"}}]} / Hello.',
        "it called get_weather_abc with valid arguments, and nothing when irrelevant",
    )


# --- rerank verdicts ---------------------------------------------------------------------


def ranked(*scores: float) -> dict[str, Any]:
    return {"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]}


def test_a_relevant_passage_tied_with_a_distractor_fails_the_round() -> None:
    assert judge_rerank(RERANK, (ranked(0.2, 0.9), ranked(0.5, 0.5))) == result(
        Capability.RERANK,
        FAILED,
        "'Who?': order [1, 0], relevant 1; 'Where?': order [0, 1], relevant 0",
        "for 'Where?' the relevant passage (document 0) scored 0.5, not above the best "
        "distractor's 0.5",
    )


def test_a_rerank_pass_shows_every_rounds_order() -> None:
    assert judge_rerank(RERANK, (ranked(0.2, 0.9), ranked(0.75, 0.125))) == result(
        Capability.RERANK,
        PASSED,
        "'Who?': order [1, 0], relevant 1; 'Where?': order [0, 1], relevant 0",
        "the relevant passage ranked first every round",
    )


@pytest.mark.parametrize(
    ("results", "problem"),
    [
        ([1, 2], "a result has no index or no relevance_score"),
        (
            [{"index": 0}, {"index": 1, "relevance_score": 1}],
            "a result has no index or no relevance_score",
        ),
        ([{"relevance_score": 1.0}], "a result has no index or no relevance_score"),
        (
            [{"index": 0, "relevance_score": math.inf}, {"index": 1, "relevance_score": 1}],
            "a relevance score is not a finite number",
        ),
        ([{"index": 0, "relevance_score": 1}], "expected one score for each of the 2 documents"),
    ],
)
def test_a_rerank_reply_says_what_is_wrong_with_it(results: list[object], problem: str) -> None:
    assert scores({"results": results}, 2) == problem


def test_rerank_scores_are_read_by_index() -> None:
    assert scores(
        {"results": [{"index": 1, "relevance_score": 2}, {"index": 0, "relevance_score": 0.5}]}, 2
    ) == {
        0: 0.5,
        1: 2.0,
    }


def test_a_key_name_is_key_and_four_letters() -> None:
    names = {key_name(random.Random(seed)) for seed in range(30)}
    assert all(re.fullmatch(r"key_[a-z]{4}", name) for name in names)
    assert len(names) > 1
