"""The embed probe: paraphrases are nearer to each other than to unrelated sentences.

Why it is so: docs/adr/decisions/domain-probes.md (embed.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from attrs import frozen

from nodeau.domain.probes.bank import PARAPHRASES
from nodeau.domain.probes.common import (
    Challenge,
    Draws,
    ProbeRequest,
    expectation,
    failed,
    passed,
    shown,
)
from nodeau.domain.qualification import Capability, ProbeResult

ROUTE = "/v1/embeddings"
PAIRS = 3
UNRELATED = 3
MARGIN = 0.05


@frozen(kw_only=True)
class EmbedExpected:
    texts: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...]  # (statement, paraphrase) positions in ``texts``


def embed_challenge(rng: Draws, model: str) -> Challenge:
    """Three paraphrase pairs and three unrelated statements from the bank, shuffled."""
    chosen = rng.sample(PARAPHRASES, PAIRS + UNRELATED)
    texts = [p.statement for p in chosen] + [p.paraphrase for p in chosen[:PAIRS]]
    order = rng.sample(range(len(texts)), len(texts))  # order[i]: where text i is sent
    sent = [""] * len(texts)
    for i, at in enumerate(order):
        sent[at] = texts[i]
    pairs = tuple((order[i], order[PAIRS + UNRELATED + i]) for i in range(PAIRS))
    statements = ", ".join(repr(p.statement) for p in chosen[:PAIRS])
    asked = (
        f"embed: among {len(sent)} shuffled sentences, each of {statements} must be nearest "
        f"its paraphrase by {MARGIN} cosine"
    )
    return Challenge(
        capability=Capability.EMBED,
        asked=asked,
        requests=(ProbeRequest(route=ROUTE, body={"model": model, "input": sent}),),
        expected=EmbedExpected(texts=tuple(sent), pairs=pairs),
    )


def vectors(body: object, count: int) -> list[list[float]] | str:
    """The ``count`` embeddings of an OpenAI embeddings body in input order, or what is wrong."""
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list) or len(data) != count:
        return f"expected {count} embeddings under 'data'"
    found: dict[int, list[float]] = {}
    for item in data:
        index = item.get("index") if isinstance(item, Mapping) else None
        vector = item.get("embedding") if isinstance(item, Mapping) else None
        if not isinstance(index, int) or not isinstance(vector, list) or not vector:
            return "an entry has no index or no embedding"
        if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
            return "an embedding holds something other than finite numbers"
        found[index] = [float(x) for x in vector]
    if sorted(found) != list(range(count)):
        return "the embeddings' indexes are not one per input"
    if len({len(v) for v in found.values()}) != 1:
        return "the embeddings differ in length"
    return [found[i] for i in range(count)]


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine similarity; None when either vector is zero."""
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return None if norm == 0.0 else sum(x * y for x, y in zip(a, b, strict=True)) / norm


def judge_embed(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    """Passed when each statement is nearer its paraphrase than anything else, by MARGIN."""
    expected = expectation(challenge, EmbedExpected)
    cap, asked = challenge.capability, challenge.asked
    (body,) = bodies
    got = vectors(body, len(expected.texts))
    if isinstance(got, str):
        return failed(cap, asked, shown(body), f"the reply is not usable: {got}")
    if any(cosine(v, v) is None for v in got):
        return failed(cap, asked, f"dimension {len(got[0])}", "an embedding is the zero vector")
    lines = []
    for statement, paraphrase in expected.pairs:
        near = cosine(got[statement], got[paraphrase]) or 0.0
        others = [
            cosine(got[statement], got[j]) or 0.0
            for j in range(len(got))
            if j not in (statement, paraphrase)
        ]
        line = f"{expected.texts[statement]!r}: paraphrase {near:.3f}, next {max(others):.3f}"
        lines.append(line)
        if near - max(others) < MARGIN:
            why = (
                f"{expected.texts[statement]!r} is {near:.3f} from its paraphrase and "
                f"{max(others):.3f} from an unrelated sentence: not nearer by {MARGIN}"
            )
            return failed(cap, asked, "; ".join(lines), why)
    why = f"every statement is nearest its paraphrase by at least {MARGIN} cosine"
    return passed(cap, asked, "; ".join(lines), why)
