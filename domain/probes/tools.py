"""The tools probe: a call to the named function when one is asked for, and none otherwise.

Why it is so: docs/adr/decisions/domain-probes.md (tools.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from attrs import frozen
from jsonschema import Draft202012Validator

from nodeau.domain.probes.bank import ANSWERS, CODE_CHARS, LETTERS, VERBS, WORDS
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

MAX_TOKENS = 64
TEXT_ARGUMENTS = ("code", "label", "reference", "tag")
NUMBER_ARGUMENTS = ("count", "quantity", "amount", "copies")


@frozen(kw_only=True)
class ToolsExpected:
    function: str
    schema: Mapping[str, Any]
    values: Mapping[str, object]


def function_name(rng: Draws, verb: str, noun: str) -> str:
    return f"{verb}_{noun}_{''.join(rng.sample(LETTERS, 3))}"


def tool(name: str, noun: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    description = f"Handles {noun} records; call it only when the user asks for {name}."
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


def tools_challenge(rng: Draws, model: str) -> Challenge:
    """A relevant request for one of two random functions, then an irrelevant one."""
    verb, decoy_verb = rng.sample(VERBS, 2)
    noun, decoy_noun = rng.sample(WORDS, 2)
    name = function_name(rng, verb, noun)
    decoy = function_name(rng, decoy_verb, decoy_noun)
    text_arg, number_arg = rng.choice(TEXT_ARGUMENTS), rng.choice(NUMBER_ARGUMENTS)
    code = "".join(rng.choice(CODE_CHARS) for _ in range(5))
    number = rng.randrange(2, 100)
    schema = {
        "type": "object",
        "properties": {text_arg: {"type": "string"}, number_arg: {"type": "integer"}},
        "required": [text_arg, number_arg],
        "additionalProperties": False,
    }
    decoy_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    tools = [tool(decoy, decoy_noun, decoy_schema), tool(name, noun, schema)]
    tools = rng.sample(tools, len(tools))
    request = f"Call {name} with {text_arg} {code} and {number_arg} {number}."
    unrelated = rng.choice(ANSWERS).question
    bodies = [
        {**chat_body(model, [{"role": "user", "content": text}], MAX_TOKENS), "tools": tools}
        for text in (request, unrelated)
    ]
    return Challenge(
        capability=Capability.TOOLS,
        asked=f'tools: "{request}" then, with no tool relevant, "{unrelated}"',
        requests=tuple(ProbeRequest(route=CHAT_ROUTE, body=b) for b in bodies),
        expected=ToolsExpected(
            function=name, schema=schema, values={text_arg: code, number_arg: number}
        ),
    )


def tool_calls(message: Mapping[str, Any]) -> list[object]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def call_problem(call: object, expected: ToolsExpected) -> str | None:
    """What is wrong with one tool call, or None when it is the call asked for."""
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return "a tool call has no function"
    name = function.get("name")
    if name != expected.function:
        return f"it called {name!r}, not {expected.function!r}"
    raw = function.get("arguments")
    if not isinstance(raw, str):
        return "the call's arguments are not a JSON string"
    try:
        arguments = json.loads(raw)
    except ValueError:
        return f"the call's arguments are not JSON: {raw[:80]!r}"
    error = next(iter(Draft202012Validator(expected.schema).iter_errors(arguments)), None)
    if error is not None:
        return f"the call's arguments do not fit the schema: {error.message}"
    for key, value in expected.values.items():
        if arguments[key] != value:
            return f"the call's {key} is {arguments[key]!r}, not {value!r}"
    return None


def judge_tools(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    """Passed when the relevant request gets the right call and the irrelevant one none."""
    expected = expectation(challenge, ToolsExpected)
    cap, asked = challenge.capability, challenge.asked
    relevant, irrelevant = (chat_message(b) for b in bodies)
    if relevant is None or irrelevant is None:
        return failed(cap, asked, shown(bodies), "a reply is not a chat completion")
    calls = tool_calls(relevant)
    answered = shown({"tool_calls": calls}) if calls else message_text(relevant)
    if not calls:
        if expected.function in message_text(relevant):
            why = "no tool_calls came back; the content names the function as text instead"
            return failed(cap, asked, answered, why)
        return failed(cap, asked, answered, "no tool call came back for the relevant request")
    problem = next((p for p in (call_problem(c, expected) for c in calls) if p), None)
    if problem is not None:
        return failed(cap, asked, answered, problem)
    stray = tool_calls(irrelevant)
    if stray:
        why = "a tool was called for a request no tool answers"
        return failed(cap, asked, f"{answered} / {shown({'tool_calls': stray})}", why)
    both = f"{answered} / {message_text(irrelevant)}"
    why = f"it called {expected.function} with valid arguments, and nothing when irrelevant"
    return passed(cap, asked, both, why)
