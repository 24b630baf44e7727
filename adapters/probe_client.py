"""Running qualification probes against a model server over HTTP (httpx).

Why it is so: docs/adr/decisions/adapters.md (probe_client.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import httpx

from nodeau.domain.probes import Challenge, Exchange, challenge_for, judge, probes_for
from nodeau.domain.probes.common import clip
from nodeau.domain.qualification import Capability, ProbeResult
from nodeau.domain.tasks import Task

__all__ = ["answers_health", "run_probe", "run_probes"]

HEALTH_S = 2.0  # one look at a model server's /health


def answers_health(base_url: str) -> bool:
    """Whether the model server at ``base_url`` says it is ready (``/health`` answers 200)."""
    try:
        return httpx.get(base_url + "/health", timeout=HEALTH_S, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def run_probes(
    base_url: str,
    task: Task,
    model: str,
    rng: random.Random,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
) -> tuple[ProbeResult, ...]:
    """Probe every capability a server started for ``task`` can be probed on (in
    ``probes_for`` order), with fresh content drawn from ``rng``; ``base_url`` is the
    server's root, e.g. ``http://127.0.0.1:8080``, ``model`` the id it answers to, and
    ``headers`` go with every request (its key)."""
    return run_capabilities(
        base_url, probes_for(task), model, rng, headers=headers, timeout_s=timeout_s
    )


def run_capabilities(
    base_url: str,
    capabilities: Sequence[Capability],
    model: str,
    rng: random.Random,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
) -> tuple[ProbeResult, ...]:
    """Probe each of ``capabilities``, in order, on one server."""
    with httpx.Client(
        base_url=base_url, headers=headers, timeout=timeout_s, trust_env=False
    ) as client:
        return tuple(
            run_probe(client, challenge_for(capability, rng, model), timeout_s)
            for capability in capabilities
        )


def run_probe(client: httpx.Client, challenge: Challenge, timeout_s: float) -> ProbeResult:
    """Send the challenge's requests in order (stopping at the first trouble) and judge."""
    exchanges: list[Exchange] = []
    for request in challenge.requests:
        exchange = _send(client, request.route, dict(request.body), timeout_s)
        exchanges.append(exchange)
        if exchange.trouble is not None:
            break
    return judge(challenge, tuple(exchanges))


def _send(client: httpx.Client, route: str, body: dict[str, object], timeout_s: float) -> Exchange:
    try:
        response = client.post(route, json=body)
    except httpx.TimeoutException as exc:
        return Exchange.failed(
            f"POST {route}: no answer within {timeout_s:g} s ({type(exc).__name__})"
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return Exchange.failed(f"POST {route}: {type(exc).__name__}: {exc}")
    if not response.is_success:
        return Exchange.failed(f"POST {route}: HTTP {response.status_code}: {_message(response)}")
    try:
        return Exchange.answered(response.json())
    except ValueError:
        return Exchange.failed(
            f"POST {route}: HTTP {response.status_code} with a body that is not JSON: "
            f"{clip(response.text, 200)!r}"
        )


def _message(response: httpx.Response) -> str:
    """The error message of an OpenAI-style error body, else the body's text."""
    try:
        parsed = response.json()
    except ValueError:
        return clip(response.text, 240) or "(empty body)"
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return clip(message if isinstance(message, str) else response.text, 240)
