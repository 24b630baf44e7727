"""The vision-input probe: the model names the colour of generated images.

Why it is so: docs/adr/decisions/domain-probes.md (vision.py).
"""

from __future__ import annotations

import base64
import re

from attrs import frozen

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
from nodeau.domain.probes.png import solid_png
from nodeau.domain.qualification import Capability, ProbeResult

ROUNDS = 3
MAX_TOKENS = 8
QUESTION = "What colour is this image? Answer with one word."
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "green": (20, 170, 40),
    "blue": (20, 40, 220),
    "yellow": (250, 220, 10),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
}


@frozen(kw_only=True)
class VisionExpected:
    colours: tuple[str, ...]


def image_url(colour: str) -> str:
    encoded = base64.b64encode(solid_png(COLOURS[colour])).decode("ascii")
    return f"data:image/png;base64,{encoded}"


def vision_challenge(rng: Draws, model: str) -> Challenge:
    """``ROUNDS`` images of distinct random colours, each asked about on its own."""
    colours = tuple(rng.sample(tuple(COLOURS), ROUNDS))
    requests = []
    for colour in colours:
        content = [
            {"type": "text", "text": QUESTION},
            {"type": "image_url", "image_url": {"url": image_url(colour)}},
        ]
        messages = [{"role": "user", "content": content}]
        requests.append(ProbeRequest(route=CHAT_ROUTE, body=chat_body(model, messages, MAX_TOKENS)))
    shapes = ", ".join(colours)
    return Challenge(
        capability=Capability.VISION_INPUT,
        asked=f'vision-input: "{QUESTION}" about {ROUNDS} solid-colour 32x32 PNGs ({shapes})',
        requests=tuple(requests),
        expected=VisionExpected(colours=colours),
    )


def named_colours(text: str) -> set[str]:
    """The colours among the six that ``text`` names."""
    return set(re.findall(r"[a-z]+", text.lower())) & set(COLOURS)


def judge_vision(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    """Passed when each reply names its image's colour and no other."""
    expected = expectation(challenge, VisionExpected)
    cap, asked = challenge.capability, challenge.asked
    texts: list[str] = []
    for body, colour in zip(bodies, expected.colours, strict=True):
        message = chat_message(body)
        if message is None:
            return failed(cap, asked, shown(body), "the reply is not a chat completion")
        reply = message_text(message)
        texts.append(reply)
        named = named_colours(reply)
        if named != {colour}:
            said = ", ".join(sorted(named)) or "no colour"
            why = f"the {colour} image was answered with {said}"
            return failed(cap, asked, " / ".join(texts), why)
    return passed(cap, asked, " / ".join(texts), "every image's colour was named, and only it")
