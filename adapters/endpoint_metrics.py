"""What each loopback endpoint says it served: its own ``GET /metrics`` text, read over
loopback with one client for all, never through the environment's proxy."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

TIMEOUT_S = 1.0


def metrics_texts(endpoints: Sequence[str]) -> tuple[str | None, ...]:
    """The ``/metrics`` text of each endpoint (an OpenAI base URL, ``.../v1``), in order;
    None where it did not answer 200 in time."""
    with httpx.Client(trust_env=False, timeout=TIMEOUT_S) as client:
        return tuple(_text(client, endpoint) for endpoint in endpoints)


def _text(client: httpx.Client, endpoint: str) -> str | None:
    try:
        answer = client.get(endpoint.removesuffix("/v1") + "/metrics")
        answer.raise_for_status()
    except httpx.HTTPError:
        return None
    return answer.text
