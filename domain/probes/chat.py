"""The chat probe: the model follows an instruction carrying a random word.

Two rounds, each asking for a different word drawn from the bank, so an answer that never
changes fails at least one. A reply passes a round when it contains its word (as a word,
any case) and is not the instruction handed back: a server that echoes its prompt fails.
"""

from __future__ import annotations

import re

from attrs import frozen

from nodeau.domain.probes.bank import WORDS
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

ROUNDS = 2
MAX_TOKENS = 12


@frozen(kw_only=True)
class ChatExpected:
    instructions: tuple[str, ...]
    words: tuple[str, ...]


def instruction(word: str) -> str:
    return f"Say the word {word}."


def chat_challenge(rng: Draws, model: str) -> Challenge:
    """Ask, in separate requests, for ``ROUNDS`` different words drawn from the bank."""
    words = tuple(rng.sample(WORDS, ROUNDS))
    instructions = tuple(instruction(w) for w in words)
    requests = tuple(
        ProbeRequest(
            route=CHAT_ROUTE,
            body=chat_body(model, [{"role": "user", "content": text}], MAX_TOKENS),
        )
        for text in instructions
    )
    asked = "chat: " + " / ".join(f'"{text}"' for text in instructions)
    return Challenge(
        capability=Capability.CHAT,
        asked=asked,
        requests=requests,
        expected=ChatExpected(instructions=instructions, words=words),
    )


def has_word(text: str, word: str) -> bool:
    """Whether ``word`` appears in ``text`` as a whole word, in any case."""
    return re.search(rf"(?<![a-z]){re.escape(word.lower())}(?![a-z])", text.lower()) is not None


def echoes(reply: str, instruction_text: str) -> bool:
    """Whether the reply carries the instruction itself (spacing and case aside)."""
    flat_reply = " ".join(reply.lower().split())
    return " ".join(instruction_text.lower().split()) in flat_reply


def judge_chat(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    """Passed when every round's reply says its word without echoing the instruction."""
    expected = expectation(challenge, ChatExpected)
    cap, asked = challenge.capability, challenge.asked
    texts: list[str] = []
    for body, word, text in zip(bodies, expected.words, expected.instructions, strict=True):
        message = chat_message(body)
        if message is None:
            return failed(cap, asked, shown(body), "the reply is not a chat completion")
        reply = message_text(message)
        texts.append(reply)
        answered = " / ".join(texts)
        if not reply.strip():
            return failed(cap, asked, answered, f"the reply to {text!r} is empty")
        if echoes(reply, text):
            return failed(cap, asked, answered, f"the reply echoes the instruction {text!r}")
        if not has_word(reply, word):
            return failed(cap, asked, answered, f"the reply to {text!r} does not say {word!r}")
    words = ", ".join(repr(w) for w in expected.words)
    return passed(cap, asked, " / ".join(texts), f"every reply said its word ({words})")
