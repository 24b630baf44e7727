"""The structured-output probe: JSON that fits a ``response_format`` schema, with the values
asked for.

Why it is so: docs/adr/decisions/domain-probes.md (structured.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from attrs import frozen
from jsonschema import Draft202012Validator

from nodeau.domain.probes.bank import LETTERS, WORDS
from nodeau.domain.probes.common import (
    CHAT_ROUTE,
    Challenge,
    Draws,
    ProbeRequest,
    chat_body,
    chat_message,
    expectation,
    failed,
    message_text,
    passed,
    shown,
)
from nodeau.domain.qualification import Capability, ProbeResult

MAX_TOKENS = 80


@frozen(kw_only=True)
class StructuredExpected:
    schema: Mapping[str, Any]
    values: Mapping[str, object]


def key_name(rng: Draws) -> str:
    return "key_" + "".join(rng.sample(LETTERS, 4))


def structured_challenge(rng: Draws, model: str) -> Challenge:
    """A schema of three random required keys; the prompt asks for two of the values."""
    word_key = key_name(rng)
    number_key = key_name(rng)
    while number_key == word_key:  # each key drawn again until it differs from those before it
        number_key = key_name(rng)
    fixed_key = key_name(rng)
    while fixed_key in (word_key, number_key):
        fixed_key = key_name(rng)
    word, fixed = rng.sample(WORDS, 2)
    number = rng.randrange(10, 100)
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
    prompt = (
        f'Return a JSON object with "{word_key}" set to "{word}" '
        f'and "{number_key}" set to {number}.'
    )
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    body = {
        **chat_body(model, [{"role": "user", "content": prompt}], MAX_TOKENS),
        "response_format": response_format,
    }
    return Challenge(
        capability=Capability.STRUCTURED_OUTPUT,
        asked=f'structured-output: "{prompt}" (the schema also requires "{fixed_key}": "{fixed}")',
        requests=(ProbeRequest(route=CHAT_ROUTE, body=body),),
        expected=StructuredExpected(
            schema=schema, values={word_key: word, number_key: number, fixed_key: fixed}
        ),
    )


def finished_by_length(body: object) -> bool:
    choices = body.get("choices") if isinstance(body, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return isinstance(first, Mapping) and first.get("finish_reason") == "length"


def judge_structured(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    """Passed when the reply is JSON fitting the schema and holding the requested values."""
    expected = expectation(challenge, StructuredExpected)
    cap, asked = challenge.capability, challenge.asked
    (body,) = bodies
    message = chat_message(body)
    if message is None:
        return failed(cap, asked, shown(body), "the reply is not a chat completion")
    text = message_text(message)
    try:
        value = json.loads(text)
    except ValueError:
        cut = " (it was cut off at the token limit)" if finished_by_length(body) else ""
        return failed(cap, asked, text, f"the reply is not the JSON response_format asks for{cut}")
    error = next(iter(Draft202012Validator(expected.schema).iter_errors(value)), None)
    if error is not None:
        return failed(cap, asked, text, f"the JSON does not fit the schema: {error.message}")
    for key, wanted in expected.values.items():
        if value[key] != wanted:
            return failed(cap, asked, text, f"{key} is {value[key]!r}, not {wanted!r}")
    return passed(cap, asked, text, "the JSON fits the schema and holds the values asked for")
