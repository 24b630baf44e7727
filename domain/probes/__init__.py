"""Qualification probes: one per capability, each designed to fail if the model lacks it.

Why it is so: docs/adr/decisions/domain-probes.md (__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable

from nodeau.domain.probes.chat import chat_challenge, judge_chat
from nodeau.domain.probes.common import Challenge, Draws, Exchange, ProbeRequest, clip, failed
from nodeau.domain.probes.embed import embed_challenge, judge_embed
from nodeau.domain.probes.rerank import judge_rerank, rerank_challenge
from nodeau.domain.probes.structured import judge_structured, structured_challenge
from nodeau.domain.probes.tools import judge_tools, tools_challenge
from nodeau.domain.probes.vision import judge_vision, vision_challenge
from nodeau.domain.qualification import Capability, ProbeResult
from nodeau.domain.tasks import Task

__all__ = [
    "Challenge",
    "Draws",
    "Exchange",
    "ProbeRequest",
    "challenge_for",
    "judge",
    "probes_for",
]

_PROBED: dict[Task, tuple[Capability, ...]] = {
    Task.CHAT: (
        Capability.CHAT,
        Capability.TOOLS,
        Capability.STRUCTURED_OUTPUT,
        Capability.VISION_INPUT,
    ),
    Task.EMBED: (Capability.EMBED,),
    Task.RERANK: (Capability.RERANK,),
}

_BUILD: dict[Capability, Callable[[Draws, str], Challenge]] = {
    Capability.CHAT: chat_challenge,
    Capability.EMBED: embed_challenge,
    Capability.RERANK: rerank_challenge,
    Capability.TOOLS: tools_challenge,
    Capability.STRUCTURED_OUTPUT: structured_challenge,
    Capability.VISION_INPUT: vision_challenge,
}

_JUDGE: dict[Capability, Callable[[Challenge, tuple[object, ...]], ProbeResult]] = {
    Capability.CHAT: judge_chat,
    Capability.EMBED: judge_embed,
    Capability.RERANK: judge_rerank,
    Capability.TOOLS: judge_tools,
    Capability.STRUCTURED_OUTPUT: judge_structured,
    Capability.VISION_INPUT: judge_vision,
}


def probes_for(task: Task) -> tuple[Capability, ...]:
    """The capabilities a server started for ``task`` can be probed on (its routes answer
    them): a chat server for chat, tools, structured output and vision input; an embedding
    server for embed; a rerank server for rerank."""
    return _PROBED[task]


def challenge_for(capability: Capability, rng: Draws, model: str) -> Challenge:
    """A fresh challenge for ``capability``, drawn with ``rng``, addressed to ``model``."""
    return _BUILD[capability](rng, model)


def judge(challenge: Challenge, exchanges: tuple[Exchange, ...]) -> ProbeResult:
    """The verdict on what came back for the challenge's requests, in order.

    Any trouble (an HTTP error, a timeout, a body that is not JSON) fails the probe with the
    trouble as its evidence; so does a missing reply. Otherwise the capability's judge
    decides on the parsed bodies."""
    cap, asked = challenge.capability, challenge.asked
    for number, exchange in enumerate(exchanges, start=1):
        if exchange.trouble is not None:
            why = (
                f"request {number} of {len(challenge.requests)} got no usable answer: "
                f"{clip(exchange.trouble, 160)}"
            )
            return failed(cap, asked, exchange.trouble, why)
    if len(exchanges) != len(challenge.requests):
        why = f"{len(exchanges)} answers came back for {len(challenge.requests)} requests"
        return failed(cap, asked, "", why)
    return _JUDGE[cap](challenge, tuple(e.body for e in exchanges))
