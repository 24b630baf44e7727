"""The Playground's chat: a system message, a temperature and the turns so far are checked
and sent as asked, and the ``curl`` and ``openai`` equivalents send that very request (the
Python one run against a stand-in ``openai`` module that keeps what it was asked)."""

from __future__ import annotations

import json
import shlex
import sys
import types
from typing import Any

import pytest

from nodeau.apps.dashboard import playground
from tests.support.builders.dashboard_views import TARGET

TURNS = [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": 'it\'s "hi"'},
    {"role": "user", "content": "and again?"},
]


def test_the_turns_and_the_temperature_are_sent_as_asked() -> None:
    body = playground.chat_body(TARGET, {"messages": TURNS, "max_tokens": 8, "temperature": 0.3})
    assert body == {
        "model": "chat", "messages": TURNS, "stream": True, "max_tokens": 8, "temperature": 0.3,
    }  # fmt: skip


def test_an_empty_answer_can_be_a_turn_but_an_empty_question_cannot() -> None:
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""},
            {"role": "user", "content": "again"}]  # fmt: skip
    assert playground.chat_body(TARGET, {"messages": said})["messages"] == said
    for role in ("user", "system"):
        with pytest.raises(playground.PlaygroundError) as refused:
            playground.chat_body(TARGET, {"messages": [{"role": role, "content": " "}]})
        assert refused.value.one_line() == "a message must be a non-empty string"


@pytest.mark.parametrize("temperature", [-0.1, 2.5, "0.3", True, None])
def test_a_temperature_out_of_range_or_not_a_number_is_one_line(temperature: object) -> None:
    asked: dict[str, Any] = {"messages": TURNS[1:2], "temperature": temperature}
    if temperature is None:  # left out: the server's own default
        assert "temperature" not in playground.chat_body(TARGET, asked)
        return
    with pytest.raises(playground.PlaygroundError) as refused:
        playground.chat_body(TARGET, asked)
    assert refused.value.one_line() == "temperature must be a number from 0 to 2"


def test_the_curl_equivalent_sends_the_turns_and_the_temperature() -> None:
    body = playground.chat_body(TARGET, {"messages": TURNS, "temperature": 0.3})
    words = shlex.split(playground.snippets(TARGET, body)["curl"].replace("\\\n", " "))
    assert json.loads(words[words.index("-d") + 1]) == body


def test_the_openai_equivalent_asks_for_the_very_request_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = playground.chat_body(TARGET, {"messages": TURNS, "max_tokens": 8, "temperature": 0.3})
    asked: list[dict[str, Any]] = []

    class Completions:
        def create(self, **kwargs: Any) -> list[Any]:
            asked.append(kwargs)
            return []  # no chunks: the snippet's loop prints nothing

    class OpenAI:
        def __init__(self, *, base_url: str, api_key: str) -> None:
            asked.append({"base_url": base_url})
            self.chat = types.SimpleNamespace(completions=Completions())

    stand_in = types.ModuleType("openai")
    stand_in.OpenAI = OpenAI  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "openai", stand_in)
    code = playground.snippets(TARGET, body)["python"]
    exec(compile(code, "snippet", "exec"), {})  # our own snippet, run against a stand-in client
    assert asked == [{"base_url": TARGET.endpoint}, body]
    # a conversation is written one turn a line
    assert "        {'role': 'assistant', 'content': 'it\\'s \"hi\"'}," in code.splitlines()
