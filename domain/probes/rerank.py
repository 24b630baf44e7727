"""The rerank probe: the one relevant passage scores above shuffled distractors.

Why it is so: docs/adr/decisions/domain-probes.md (rerank.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from attrs import frozen

from nodeau.domain.probes.bank import ANSWERS
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

ROUTE = "/v1/rerank"
ROUNDS = 3
DOCUMENTS = 5


@frozen(kw_only=True)
class RerankExpected:
    questions: tuple[str, ...]
    relevant: tuple[int, ...]  # per round, the position of the relevant passage
    documents: int


def rerank_challenge(rng: Draws, model: str) -> Challenge:
    """``ROUNDS`` questions, each with its passage at a distinct random position."""
    chosen = rng.sample(ANSWERS, ROUNDS)
    positions = rng.sample(range(DOCUMENTS), ROUNDS)
    requests = []
    for answer, at in zip(chosen, positions, strict=True):
        others = [a.passage for a in ANSWERS if a is not answer]
        documents = rng.sample(others, DOCUMENTS - 1)
        documents.insert(at, answer.passage)
        body = {"model": model, "query": answer.question, "documents": documents}
        requests.append(ProbeRequest(route=ROUTE, body=body))
    asked = "rerank: " + " / ".join(
        f"{a.question!r} (relevant at {at} of {DOCUMENTS})"
        for a, at in zip(chosen, positions, strict=True)
    )
    return Challenge(
        capability=Capability.RERANK,
        asked=asked,
        requests=tuple(requests),
        expected=RerankExpected(
            questions=tuple(a.question for a in chosen),
            relevant=tuple(positions),
            documents=DOCUMENTS,
        ),
    )


def scores(body: object, count: int) -> dict[int, float] | str:
    """Each document's relevance score from a llama-server rerank body, or what is wrong."""
    results = body.get("results") if isinstance(body, Mapping) else None
    if not isinstance(results, list):
        return "no 'results' list"
    found: dict[int, float] = {}
    for item in results:
        index = item.get("index") if isinstance(item, Mapping) else None
        score = item.get("relevance_score") if isinstance(item, Mapping) else None
        if not isinstance(index, int) or not isinstance(score, int | float):
            return "a result has no index or no relevance_score"
        if not math.isfinite(score):
            return "a relevance score is not a finite number"
        found[index] = float(score)
    if sorted(found) != list(range(count)):
        return f"expected one score for each of the {count} documents"
    return found


def judge_rerank(challenge: Challenge, bodies: tuple[object, ...]) -> ProbeResult:
    """Passed when, in every round, the relevant passage scores strictly highest."""
    expected = expectation(challenge, RerankExpected)
    cap, asked = challenge.capability, challenge.asked
    lines: list[str] = []
    for body, question, relevant in zip(bodies, expected.questions, expected.relevant, strict=True):
        got = scores(body, expected.documents)
        if isinstance(got, str):
            return failed(cap, asked, shown(body), f"the reply is not usable: {got}")
        best_other = max(s for i, s in got.items() if i != relevant)
        ranked = sorted(got, key=lambda i: -got[i])
        lines.append(f"{question!r}: order {ranked}, relevant {relevant}")
        if got[relevant] <= best_other:
            why = (
                f"for {question!r} the relevant passage (document {relevant}) scored "
                f"{got[relevant]:.4g}, not above the best distractor's {best_other:.4g}"
            )
            return failed(cap, asked, "; ".join(lines), why)
    return passed(cap, asked, "; ".join(lines), "the relevant passage ranked first every round")
