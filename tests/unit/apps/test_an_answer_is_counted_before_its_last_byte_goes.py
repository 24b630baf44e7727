"""An answer is in ``/metrics`` by the time its client has its last byte: a client that
asks for the counters once its answer has ended finds that answer counted."""

from __future__ import annotations

import asyncio

from starlette.types import Message

from nodeau.apps.endpoint.metrics import WORKLOAD, Metrics

USAGE = b'{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}'


def counted(metrics: Metrics) -> float:
    value = metrics.registry.get_sample_value(
        "nodeau_requests_total",
        {"workload": "tiny", "route": "/v1/chat/completions", "code": "200"},
    )
    return value or 0.0


def test_the_last_part_reaches_the_client_with_the_answer_counted() -> None:
    metrics = Metrics()
    scope = {"type": "http", "path": "/v1/chat/completions", WORKLOAD: "tiny"}
    seen_by_client: list[tuple[bool, float]] = []  # (last part?, requests counted then)

    async def client_side(message: Message) -> None:
        last = message["type"] == "http.response.body" and not message.get("more_body", False)
        seen_by_client.append((last, counted(metrics)))

    async def answer() -> None:
        send = metrics.watching(scope, client_side)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{", "more_body": True})
        await send({"type": "http.response.body", "body": USAGE[1:], "more_body": False})

    asyncio.run(answer())
    assert seen_by_client == [(False, 0.0), (False, 0.0), (True, 1.0)]


def test_the_usage_of_the_last_part_is_counted_with_it() -> None:
    metrics = Metrics()
    scope = {"type": "http", "path": "/v1/chat/completions", WORKLOAD: "tiny"}
    sent: list[Message] = []

    async def client_side(message: Message) -> None:
        sent.append(message)

    async def answer() -> None:
        send = metrics.watching(scope, client_side)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": USAGE, "more_body": False})

    asyncio.run(answer())
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert counted(metrics) == 1.0
    prompt = metrics.registry.get_sample_value(
        "nodeau_tokens_total", {"workload": "tiny", "kind": "prompt"}
    )
    assert prompt == 7.0
