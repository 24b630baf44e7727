"""The qualification probes' challenges and judges, without a server.

A correct answer (built here from what the challenge expects) passes; every answer that
is empty, garbage, or a near miss fails, and a judge never raises on any JSON value.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from nodeau.domain.probes import Exchange, challenge_for, judge, probes_for
from nodeau.domain.probes.chat import ChatExpected
from nodeau.domain.probes.common import ANSWER_CHARS, Challenge, clip
from nodeau.domain.probes.embed import MARGIN, EmbedExpected, cosine
from nodeau.domain.probes.png import solid_png
from nodeau.domain.probes.rerank import RerankExpected
from nodeau.domain.probes.structured import StructuredExpected
from nodeau.domain.probes.tools import ToolsExpected
from nodeau.domain.probes.vision import COLOURS, VisionExpected
from nodeau.domain.qualification import Capability, ProbeOutcome, ProbeResult
from nodeau.domain.tasks import Task

seeds = st.integers(min_value=0, max_value=2**32 - 1)
capabilities = st.sampled_from(list(Capability))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def chat(content: object = None, tool_calls: object = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def call(name: str, arguments: object) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def correct_bodies(challenge: Challenge) -> tuple[object, ...]:
    """What a capable server answers, read from what the challenge expects."""
    e = challenge.expected
    if isinstance(e, ChatExpected):
        return tuple(chat(f"{w.capitalize()}.") for w in e.words)
    if isinstance(e, EmbedExpected):
        vectors = [[0.0] * 8 for _ in e.texts]
        for n, (a, b) in enumerate(e.pairs):
            vectors[a][n] = vectors[b][n] = 1.0
        unpaired = [i for i in range(len(e.texts)) if all(i not in p for p in e.pairs)]
        for n, i in enumerate(unpaired):
            vectors[i][4 + n] = 1.0
        return ({"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]},)
    if isinstance(e, RerankExpected):
        return tuple(
            {
                "results": [
                    {"index": i, "relevance_score": 1.0 if i == relevant else 0.1}
                    for i in range(e.documents)
                ]
            }
            for relevant in e.relevant
        )
    if isinstance(e, ToolsExpected):
        return chat(None, [call(e.function, dict(e.values))]), chat("Nine minutes.")
    if isinstance(e, StructuredExpected):
        return (chat(json.dumps(dict(e.values))),)
    assert isinstance(e, VisionExpected)
    return tuple(chat(f"{c.capitalize()}.") for c in e.colours)


def verdict(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    return judge(challenge, tuple(Exchange.answered(b) for b in bodies))


def fresh(capability: Capability, seed: int = 0) -> Challenge:
    return challenge_for(capability, random.Random(seed), "m")


@pytest.mark.parametrize(
    ("task", "probed"),
    [
        (
            Task.CHAT,
            (
                Capability.CHAT,
                Capability.TOOLS,
                Capability.STRUCTURED_OUTPUT,
                Capability.VISION_INPUT,
            ),
        ),
        (Task.EMBED, (Capability.EMBED,)),
        (Task.RERANK, (Capability.RERANK,)),
    ],
)
def test_a_task_is_probed_on_the_capabilities_its_routes_answer(
    task: Task, probed: tuple[Capability, ...]
) -> None:
    assert probes_for(task) == probed


def test_every_capability_is_probed_for_exactly_one_task() -> None:
    probed = [c for task in Task for c in probes_for(task)]
    assert sorted(probed) == sorted(Capability)


@settings(max_examples=60, deadline=None)
@given(capability=capabilities, seed=seeds)
def test_a_correct_answer_passes(capability: Capability, seed: int) -> None:
    challenge = fresh(capability, seed)
    result = verdict(challenge, correct_bodies(challenge))
    assert result.outcome is ProbeOutcome.PASSED, result
    assert result.capability is capability
    assert result.asked == challenge.asked
    assert result.asked.startswith(f"{capability.value}: ")


@settings(max_examples=40, deadline=None)
@given(capability=capabilities, seed=seeds)
def test_the_same_seed_asks_the_same_thing(capability: Capability, seed: int) -> None:
    one, two = fresh(capability, seed), fresh(capability, seed)
    assert one.asked == two.asked
    assert [r.body for r in one.requests] == [r.body for r in two.requests]


@pytest.mark.parametrize("capability", list(Capability))
def test_fresh_content_differs_across_seeds(capability: Capability) -> None:
    asked = {fresh(capability, seed).asked for seed in range(20)}
    bodies = {json.dumps([r.body for r in fresh(capability, s).requests]) for s in range(20)}
    assert len(asked) >= 18
    assert len(bodies) >= 18


@pytest.mark.parametrize("capability", list(Capability))
def test_a_challenge_is_addressed_to_the_model(capability: Capability) -> None:
    challenge = challenge_for(capability, random.Random(0), "my-model")
    assert challenge.requests
    assert all(r.body["model"] == "my-model" for r in challenge.requests)


@settings(max_examples=150, deadline=None)
@given(capability=capabilities, seed=seeds, garbage=st.lists(json_values, min_size=1, max_size=3))
def test_a_judge_never_passes_garbage_and_never_raises(
    capability: Capability, seed: int, garbage: list[object]
) -> None:
    challenge = fresh(capability, seed)
    bodies = tuple((garbage * 3)[: len(challenge.requests)])
    result = verdict(challenge, bodies)
    assert result.outcome is ProbeOutcome.FAILED
    assert result.why
    assert len(result.answered) <= ANSWER_CHARS


@settings(max_examples=60, deadline=None)
@given(capability=capabilities, seed=seeds, text=st.sampled_from(["", " ", "{}", "null", "OK"]))
def test_an_empty_or_meaningless_reply_fails(capability: Capability, seed: int, text: str) -> None:
    challenge = fresh(capability, seed)
    result = verdict(challenge, tuple(chat(text) for _ in challenge.requests))
    assert result.outcome is ProbeOutcome.FAILED


@pytest.mark.parametrize("capability", list(Capability))
def test_any_trouble_fails_the_probe_with_the_trouble_as_evidence(capability: Capability) -> None:
    challenge = fresh(capability)
    good = correct_bodies(challenge)
    exchanges = (*(Exchange.answered(b) for b in good[:-1]), Exchange.failed("HTTP 500: boom"))
    result = judge(challenge, exchanges)
    assert result.outcome is ProbeOutcome.FAILED
    assert result.answered == "HTTP 500: boom"
    assert "boom" in result.why


@pytest.mark.parametrize("capability", list(Capability))
def test_a_missing_answer_fails_the_probe(capability: Capability) -> None:
    challenge = fresh(capability)
    result = verdict(challenge, correct_bodies(challenge)[:-1])
    assert result.outcome is ProbeOutcome.FAILED


# --- chat ----------------------------------------------------------------------------------


def test_chat_fails_an_echo_of_the_instruction() -> None:
    challenge = fresh(Capability.CHAT)
    e = challenge.expected
    assert isinstance(e, ChatExpected)
    result = verdict(challenge, tuple(chat(f"echo: {text}") for text in e.instructions))
    assert result.outcome is ProbeOutcome.FAILED
    assert "echoes" in result.why


def test_chat_needs_the_word_as_a_word() -> None:
    challenge = fresh(Capability.CHAT)
    e = challenge.expected
    assert isinstance(e, ChatExpected)
    glued = tuple(chat(f"x{w}x") for w in e.words)
    assert verdict(challenge, glued).outcome is ProbeOutcome.FAILED
    loud = tuple(chat(f'The word "{w.upper()}" is a noun.') for w in e.words)
    assert verdict(challenge, loud).outcome is ProbeOutcome.PASSED


def test_chat_asks_different_words_in_its_rounds() -> None:
    for seed in range(50):
        e = fresh(Capability.CHAT, seed).expected
        assert isinstance(e, ChatExpected)
        assert len(set(e.words)) == len(e.words)


# --- tools ---------------------------------------------------------------------------------


def tools_case(seed: int = 0) -> tuple[Challenge, ToolsExpected]:
    challenge = fresh(Capability.TOOLS, seed)
    assert isinstance(challenge.expected, ToolsExpected)
    return challenge, challenge.expected


def test_tools_fails_a_call_written_in_content() -> None:
    challenge, e = tools_case()
    text = json.dumps({"name": e.function, "arguments": dict(e.values)})
    result = verdict(challenge, (chat(text), chat("Nine minutes.")))
    assert result.outcome is ProbeOutcome.FAILED
    assert "content" in result.why


@pytest.mark.parametrize(
    "change",
    [
        lambda v: {k: x for k, x in v.items() if not isinstance(x, int)},  # a required one left out
        lambda v: {k: str(x) for k, x in v.items()},  # the integer as a string
        lambda v: {k: x + 1 if isinstance(x, int) else x for k, x in v.items()},  # wrong value
        lambda v: {**v, "extra": 1},  # not in the schema
    ],
)
def test_tools_fails_arguments_that_do_not_fit_or_differ(change: Any) -> None:
    challenge, e = tools_case()
    relevant = chat(None, [call(e.function, change(dict(e.values)))])
    assert verdict(challenge, (relevant, chat("ok"))).outcome is ProbeOutcome.FAILED


def test_tools_fails_a_call_to_another_function_even_beside_the_right_one() -> None:
    challenge, e = tools_case()
    right = call(e.function, dict(e.values))
    for calls in ([call("other", dict(e.values))], [right, call("other", dict(e.values))]):
        assert verdict(challenge, (chat(None, calls), chat("ok"))).outcome is ProbeOutcome.FAILED


def test_tools_fails_a_call_on_the_irrelevant_request() -> None:
    challenge, e = tools_case()
    right = chat(None, [call(e.function, dict(e.values))])
    result = verdict(challenge, (right, right))
    assert result.outcome is ProbeOutcome.FAILED
    assert "irrelevant" in result.why or "no tool answers" in result.why


def test_tools_names_and_values_are_fresh_each_time() -> None:
    functions = {tools_case(seed)[1].function for seed in range(30)}
    assert len(functions) >= 28


# --- structured output ---------------------------------------------------------------------


def test_structured_output_fails_json_without_the_key_only_the_schema_names() -> None:
    challenge = fresh(Capability.STRUCTURED_OUTPUT)
    e = challenge.expected
    assert isinstance(e, StructuredExpected)
    prompt_keys = dict(list(e.values.items())[:2])
    assert all(key in challenge.asked for key in prompt_keys)
    result = verdict(challenge, (chat(json.dumps(prompt_keys)),))
    assert result.outcome is ProbeOutcome.FAILED
    assert "schema" in result.why


def test_structured_output_fails_fenced_or_wrong_json() -> None:
    challenge = fresh(Capability.STRUCTURED_OUTPUT)
    e = challenge.expected
    assert isinstance(e, StructuredExpected)
    fenced = chat(f"```json\n{json.dumps(dict(e.values))}\n```")
    wrong = chat(json.dumps({k: v + 1 if isinstance(v, int) else v for k, v in e.values.items()}))
    assert verdict(challenge, (fenced,)).outcome is ProbeOutcome.FAILED
    assert verdict(challenge, (wrong,)).outcome is ProbeOutcome.FAILED


# --- embed, rerank, vision -----------------------------------------------------------------


def test_embed_fails_equal_vectors_and_needs_the_margin() -> None:
    challenge = fresh(Capability.EMBED)
    e = challenge.expected
    assert isinstance(e, EmbedExpected)
    equal = {"data": [{"index": i, "embedding": [0.5, 0.5]} for i in range(len(e.texts))]}
    assert verdict(challenge, (equal,)).outcome is ProbeOutcome.FAILED
    (good,) = correct_bodies(challenge)
    assert isinstance(good, dict)
    for item in good["data"]:  # everything a little nearer to everything: under the margin
        item["embedding"] = [x + 10.0 for x in item["embedding"]]
    assert verdict(challenge, (good,)).outcome is ProbeOutcome.FAILED


@given(vector=st.lists(st.floats(min_value=-1e3, max_value=1e3), min_size=1, max_size=8))
def test_cosine_of_a_vector_with_itself_is_one_unless_it_is_zero(vector: list[float]) -> None:
    got = cosine(vector, vector)
    if all(x == 0.0 for x in vector):
        assert got is None
    elif got is not None:
        assert got == pytest.approx(1.0)


def test_the_embed_margin_is_positive() -> None:
    assert MARGIN > 0


def test_rerank_puts_the_relevant_passage_at_distinct_positions() -> None:
    for seed in range(50):
        e = fresh(Capability.RERANK, seed).expected
        assert isinstance(e, RerankExpected)
        assert len(set(e.relevant)) == len(e.relevant)


@pytest.mark.parametrize("order", ["given", "reversed", "equal"])
def test_rerank_fails_order_based_scores(order: str) -> None:
    challenge = fresh(Capability.RERANK)
    e = challenge.expected
    assert isinstance(e, RerankExpected)
    scores: dict[str, Callable[[int], float]] = {
        "given": lambda i: 1.0 / (1 + i),
        "reversed": float,
        "equal": lambda i: 0.5,
    }
    score = scores[order]
    body = {"results": [{"index": i, "relevance_score": score(i)} for i in range(e.documents)]}
    result = verdict(challenge, tuple(body for _ in e.relevant))
    assert result.outcome is ProbeOutcome.FAILED


def test_vision_asks_distinct_colours_and_fails_a_constant_or_listing_answer() -> None:
    challenge = fresh(Capability.VISION_INPUT)
    e = challenge.expected
    assert isinstance(e, VisionExpected)
    assert len(set(e.colours)) == len(e.colours)
    for text in (f"{e.colours[0]}.", " ".join(COLOURS)):
        replies = tuple(chat(text) for _ in e.colours)
        assert verdict(challenge, replies).outcome is ProbeOutcome.FAILED
    assert all(
        c not in challenge.requests[0].body["messages"][0]["content"][0]["text"] for c in COLOURS
    )


@given(rgb=st.tuples(*[st.integers(0, 255)] * 3), size=st.integers(1, 16))
def test_a_solid_png_holds_its_colour_in_every_pixel(rgb: tuple[int, int, int], size: int) -> None:
    image = Image.open(io.BytesIO(solid_png(rgb, size)))
    assert (image.format, image.mode, image.size) == ("PNG", "RGB", (size, size))
    assert image.getcolors() == [(size * size, rgb)]


@given(text=st.text(max_size=1000))
def test_clipped_evidence_is_one_short_line(text: str) -> None:
    got = clip(text)
    assert len(got) <= ANSWER_CHARS
    assert "\n" not in got
