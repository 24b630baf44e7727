"""What every probe shares: the challenge sent, what came back, and how a verdict is written.

A probe is a challenge (one or more requests, built from fresh random content) and a judge
of the replies. The randomness comes in as an argument (``Draws``: ``random.Random`` has
these methods), so the domain holds no random state and a test can seed it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from attrs import field, frozen

from nodeau.domain.qualification import Capability, ProbeOutcome, ProbeResult

T = TypeVar("T")

ANSWER_CHARS = 300  # evidence is kept readable: the first characters of what came back
CHAT_ROUTE = "/v1/chat/completions"


class Draws(Protocol):
    """The random draws a challenge needs; ``random.Random`` provides them."""

    def choice(self, seq: Sequence[T]) -> T: ...

    def sample(self, population: Sequence[T], k: int) -> list[T]: ...

    def randrange(self, start: int, stop: int) -> int: ...


@frozen(kw_only=True)
class ProbeRequest:
    """One HTTP request of a challenge: a POST of ``body`` (JSON) to ``route``."""

    route: str
    body: Mapping[str, Any] = field(eq=False)


@frozen(kw_only=True)
class Exchange:
    """What came back for one request: the parsed JSON body of a 2xx answer, or the trouble
    (an HTTP error with the server's message, a timeout, a body that is not JSON)."""

    body: object = None
    trouble: str | None = None

    @classmethod
    def answered(cls, body: object) -> Exchange:
        return cls(body=body)

    @classmethod
    def failed(cls, trouble: str) -> Exchange:
        return cls(trouble=trouble)


def clip(text: str, limit: int = ANSWER_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (an ellipsis says it was cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def passed(capability: Capability, asked: str, answered: str, why: str) -> ProbeResult:
    return ProbeResult(
        capability=capability,
        outcome=ProbeOutcome.PASSED,
        asked=asked,
        answered=clip(answered),
        why=why,
    )


def failed(capability: Capability, asked: str, answered: str, why: str) -> ProbeResult:
    return ProbeResult(
        capability=capability,
        outcome=ProbeOutcome.FAILED,
        asked=asked,
        answered=clip(answered),
        why=why,
    )


def shown(body: object) -> str:
    """A body as evidence: compact JSON (or its text when it is not JSON-encodable)."""
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(body)


def chat_message(body: object) -> Mapping[str, Any] | None:
    """The assistant message of a chat completion body (``choices[0].message``), or None."""
    if not isinstance(body, Mapping):
        return None
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, Mapping) else None


def message_text(message: Mapping[str, Any]) -> str:
    """The text content of a message ("" when there is none)."""
    content = message.get("content")
    return content if isinstance(content, str) else ""


def chat_body(model: str, messages: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    """A short, deterministic chat completion request."""
    return {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
    }


@frozen(kw_only=True)
class Challenge:
    """One probe's fresh content: the requests to send, in order, a readable line of what is
    asked, and what the capability's judge expects back (its own value type)."""

    capability: Capability
    asked: str
    requests: tuple[ProbeRequest, ...]
    expected: object = field(eq=False)


E = TypeVar("E")


def expectation(challenge: Challenge, kind: type[E]) -> E:
    """The challenge's expectation, which a judge only reads when it is of its own kind."""
    if not isinstance(challenge.expected, kind):
        raise TypeError(f"a {challenge.capability} challenge expects {type(challenge.expected)}")
    return challenge.expected
