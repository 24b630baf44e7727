"""What each probe sends, body by body (domain/probes/): the OpenAI-compatible requests
written out with their literal keys and settings, and checked against the challenge's own
expectation and the content bank: what the judge will look for is what was asked.
(``ProbeRequest.body`` takes no part in a challenge's equality, so only these tests see it.)"""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest

from nodeau.domain.probes.bank import ANSWERS, CODE_CHARS, LETTERS, VERBS, WORDS
from nodeau.domain.probes.chat import ChatExpected, chat_challenge
from nodeau.domain.probes.png import solid_png
from nodeau.domain.probes.rerank import RerankExpected, rerank_challenge
from nodeau.domain.probes.structured import StructuredExpected, structured_challenge
from nodeau.domain.probes.tools import ToolsExpected, tools_challenge
from nodeau.domain.probes.vision import COLOURS, VisionExpected, vision_challenge
from tests.support.builders.draws import RepeatingDraws

SEEDS = range(12)
CHAT_ROUTE = "/v1/chat/completions"


def chat_request(content: object, max_tokens: int, **extra: object) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
        **extra,
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_chat_asks_each_word_in_its_own_short_deterministic_request(seed: int) -> None:
    challenge = chat_challenge(random.Random(seed), "m")
    expected = challenge.expected
    assert isinstance(expected, ChatExpected)
    assert [r.route for r in challenge.requests] == [CHAT_ROUTE, CHAT_ROUTE]
    assert [dict(r.body) for r in challenge.requests] == [
        chat_request(f"Say the word {word}.", 12) for word in expected.words
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_vision_sends_each_colour_as_a_png_with_the_question(seed: int) -> None:
    challenge = vision_challenge(random.Random(seed), "m")
    expected = challenge.expected
    assert isinstance(expected, VisionExpected)
    assert [r.route for r in challenge.requests] == [CHAT_ROUTE] * 3
    sent = []
    for colour in expected.colours:
        png = base64.b64encode(solid_png(COLOURS[colour])).decode("ascii")
        content = [
            {"type": "text", "text": "What colour is this image? Answer with one word."},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
        ]
        sent.append(chat_request(content, 8))
    assert [dict(r.body) for r in challenge.requests] == sent


@pytest.mark.parametrize("seed", SEEDS)
def test_structured_output_asks_for_the_schema_the_judge_checks(seed: int) -> None:
    challenge = structured_challenge(random.Random(seed), "m")
    expected = challenge.expected
    assert isinstance(expected, StructuredExpected)
    word_key, number_key, fixed_key = expected.values
    word, number, fixed = (expected.values[k] for k in (word_key, number_key, fixed_key))
    assert len({word_key, number_key, fixed_key}) == 3
    assert isinstance(number, int) and 10 <= number < 100
    schema = {
        "type": "object",
        "properties": {
            word_key: {"type": "string"},
            number_key: {"type": "integer"},
            fixed_key: {"const": fixed},
        },
        "required": [word_key, number_key, fixed_key],
        "additionalProperties": False,
    }
    assert expected.schema == schema
    prompt = (
        f'Return a JSON object with "{word_key}" set to "{word}" '
        f'and "{number_key}" set to {number}.'
    )
    (request,) = challenge.requests
    assert request.route == CHAT_ROUTE
    assert dict(request.body) == chat_request(
        prompt,
        80,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": True},
        },
    )
    assert challenge.asked == (
        f'structured-output: "{prompt}" (the schema also requires "{fixed_key}": "{fixed}")'
    )


DECOY_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", SEEDS)
def test_tools_offers_the_function_and_a_decoy_in_both_requests(seed: int) -> None:
    challenge = tools_challenge(random.Random(seed), "m")
    expected = challenge.expected
    assert isinstance(expected, ToolsExpected)
    text_arg, number_arg = expected.values
    code, number = expected.values[text_arg], expected.values[number_arg]
    assert isinstance(code, str) and len(code) == 5 and set(code) <= set(CODE_CHARS)
    assert isinstance(number, int) and 2 <= number < 100
    assert expected.schema == {
        "type": "object",
        "properties": {text_arg: {"type": "string"}, number_arg: {"type": "integer"}},
        "required": [text_arg, number_arg],
        "additionalProperties": False,
    }
    first, second = (dict(r.body) for r in challenge.requests)
    assert [r.route for r in challenge.requests] == [CHAT_ROUTE, CHAT_ROUTE]
    tools = first["tools"]
    assert second["tools"] == tools
    by_name = {t["function"]["name"]: t for t in tools}
    assert len(by_name) == 2 and expected.function in by_name
    for name, offered in by_name.items():
        verb, noun, letters = name.split("_")
        assert verb and noun and len(letters) == 3
        assert offered == {
            "type": "function",
            "function": {
                "name": name,
                "description": f"Handles {noun} records; "
                f"call it only when the user asks for {name}.",
                "parameters": expected.schema if name == expected.function else DECOY_SCHEMA,
            },
        }
    request = f"Call {expected.function} with {text_arg} {code} and {number_arg} {number}."
    assert first == chat_request(request, 64, tools=tools)
    unrelated = second["messages"][0]["content"]
    assert unrelated in {a.question for a in ANSWERS}
    assert second == chat_request(unrelated, 64, tools=tools)
    assert challenge.asked == f'tools: "{request}" then, with no tool relevant, "{unrelated}"'


def test_tools_numbers_and_codes_cover_their_whole_range() -> None:
    numbers, codes = set(), set()
    for seed in range(1500):
        expected = tools_challenge(random.Random(seed), "m").expected
        assert isinstance(expected, ToolsExpected)
        first, second = expected.values.values()
        codes.add(first)
        numbers.add(second)
    assert numbers == set(range(2, 100))
    assert len(codes) > 1000


@pytest.mark.parametrize("seed", SEEDS)
def test_rerank_sends_each_question_with_its_passage_where_the_judge_looks(seed: int) -> None:
    challenge = rerank_challenge(random.Random(seed), "m")
    expected = challenge.expected
    assert isinstance(expected, RerankExpected)
    passages = {a.question: a.passage for a in ANSWERS}
    assert expected.documents == 5 and len(set(expected.relevant)) == 3
    for request, question, at in zip(
        challenge.requests, expected.questions, expected.relevant, strict=True
    ):
        assert request.route == "/v1/rerank"
        body = dict(request.body)
        assert set(body) == {"model", "query", "documents"}
        assert (body["model"], body["query"]) == ("m", question)
        documents = body["documents"]
        assert len(documents) == 5 and len(set(documents)) == 5
        assert documents[at] == passages[question]
        assert set(documents) <= set(passages.values())


@pytest.mark.parametrize("seed", SEEDS)
def test_each_challenge_says_what_it_asked_in_one_line(seed: int) -> None:
    chat = chat_challenge(random.Random(seed), "m")
    assert isinstance(chat.expected, ChatExpected)
    first, second = chat.expected.words
    assert chat.asked == f'chat: "Say the word {first}." / "Say the word {second}."'
    vision = vision_challenge(random.Random(seed), "m")
    assert isinstance(vision.expected, VisionExpected)
    a, b, c = vision.expected.colours
    assert vision.asked == (
        'vision-input: "What colour is this image? Answer with one word." about 3 '
        f"solid-colour 32x32 PNGs ({a}, {b}, {c})"
    )
    rerank = rerank_challenge(random.Random(seed), "m")
    assert isinstance(rerank.expected, RerankExpected)
    (q1, q2, q3), (p1, p2, p3) = rerank.expected.questions, rerank.expected.relevant
    assert rerank.asked == (
        f"rerank: {q1!r} (relevant at {p1} of 5) / {q2!r} (relevant at {p2} of 5) / "
        f"{q3!r} (relevant at {p3} of 5)"
    )


def test_tools_function_names_are_a_verb_a_noun_and_three_letters_from_the_bank() -> None:
    for seed in SEEDS:
        challenge = tools_challenge(random.Random(seed), "m")
        for tool in dict(challenge.requests[0].body)["tools"]:
            verb, noun, letters = tool["function"]["name"].split("_")
            assert verb in VERBS and noun in WORDS and set(letters) <= set(LETTERS)


def test_structured_numbers_cover_10_to_99() -> None:
    numbers = set()
    for seed in range(1500):
        expected = structured_challenge(random.Random(seed), "m").expected
        assert isinstance(expected, StructuredExpected)
        numbers.add(list(expected.values.values())[1])
    assert numbers == set(range(10, 100))


class Scripted(random.Random):
    """Draws whose first letter samples are scripted: the third key repeats the first."""

    def __init__(self, letters: list[str]) -> None:
        super().__init__(0)
        self.letters = letters

    def sample(self, population: Any, k: int, *, counts: Any = None) -> list[Any]:
        if population is LETTERS and self.letters:
            drawn, self.letters = list(self.letters[:k]), self.letters[k:]
            return drawn
        return super().sample(population, k)


def test_a_structured_key_drawn_twice_is_drawn_again() -> None:
    rng = Scripted(list("abcdefghabcdijkl"))
    expected = structured_challenge(rng, "m").expected
    assert isinstance(expected, StructuredExpected)
    assert list(expected.values) == ["key_abcd", "key_efgh", "key_ijkl"]


@pytest.mark.parametrize("repeats", [2, 3])
def test_keys_drawn_alike_are_drawn_again_until_all_three_differ(repeats: int) -> None:
    expected = structured_challenge(RepeatingDraws(repeats), "m").expected
    assert isinstance(expected, StructuredExpected)
    assert len(set(expected.values)) == 3
