"""An answer is in ``/metrics`` by the time its client has it whole: counted as its last
part goes, or a stream's ``data: [DONE]`` event (after which an OpenAI client hangs up);
an answer broken off once begun is counted when its request ends, and none twice."""

from __future__ import annotations

import asyncio

import pytest
from starlette.types import Message

from nodeau.apps.endpoint.metrics import WORKLOAD, Metrics, Watch

ROUTE = "/v1/chat/completions"
USAGE = b'{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}'
EVENT = b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'
USAGE_EVENT = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}\n\n'
DONE = b"data: [DONE]\n\n"
SSE = [(b"content-type", b"text/event-stream")]


def counted(metrics: Metrics, code: str = "200") -> float:
    labels = {"workload": "tiny", "route": ROUTE, "code": code}
    return metrics.registry.get_sample_value("nodeau_requests_total", labels) or 0.0


def tokens(metrics: Metrics, kind: str) -> float:
    labels = {"workload": "tiny", "kind": kind}
    return metrics.registry.get_sample_value("nodeau_tokens_total", labels) or 0.0


def answered(metrics: Metrics, messages: list[Message], *, close: bool = True) -> list[float]:
    """Send ``messages`` through a watch; the count of 200s each time the client got one."""
    seen: list[float] = []

    async def client_side(_message: Message) -> None:
        seen.append(counted(metrics))

    async def answer() -> Watch:
        watch = metrics.watching({"type": "http", "path": ROUTE, WORKLOAD: "tiny"}, client_side)
        for message in messages:
            await watch(message)
        return watch

    watch = asyncio.run(answer())
    if close:
        watch.close()
    return seen


def start(headers: list[tuple[bytes, bytes]] | None = None, status: int = 200) -> Message:
    return {"type": "http.response.start", "status": status, "headers": headers or []}


def body(part: bytes, more: bool) -> Message:
    return {"type": "http.response.body", "body": part, "more_body": more}


def test_the_last_part_reaches_the_client_with_the_answer_counted() -> None:
    metrics = Metrics()
    seen = answered(metrics, [start(), body(b"{", True), body(USAGE[1:], False)])
    assert seen == [0.0, 0.0, 1.0]


def test_a_stream_is_counted_as_its_done_event_goes_with_its_usage() -> None:
    metrics = Metrics()
    messages = [start(SSE), body(EVENT, True), body(USAGE_EVENT + DONE, True), body(b"", False)]
    assert answered(metrics, messages) == [0.0, 0.0, 1.0, 1.0]
    assert (tokens(metrics, "prompt"), tokens(metrics, "completion")) == (5.0, 2.0)


def test_a_done_event_split_across_parts_is_found() -> None:
    metrics = Metrics()
    messages = [start(SSE), body(EVENT + b"data: [DO", True), body(b"NE]\n\n", True)]
    assert answered(metrics, messages, close=False) == [0.0, 0.0, 1.0]


def test_done_inside_an_events_text_does_not_end_the_stream() -> None:
    metrics = Metrics()
    inside = b'data: {"choices": [{"delta": {"content": "\\n\\ndata: [DONE]'
    messages = [start(SSE), body(EVENT + inside, True), body(b'"}}]}\n\n', True)]
    assert answered(metrics, messages, close=False) == [0.0, 0.0, 0.0]


def test_a_stream_broken_off_is_counted_once_when_its_request_ends() -> None:
    metrics = Metrics()
    assert answered(metrics, [start(SSE), body(EVENT, True)]) == [0.0, 0.0]
    assert counted(metrics) == 1.0


@pytest.mark.parametrize("code", [200, 404])
def test_closing_after_the_end_counts_nothing_more(code: int) -> None:
    metrics = Metrics()
    answered(metrics, [start(status=code), body(b"{}", False)])
    assert counted(metrics, str(code)) == 1.0


def test_a_request_that_never_began_an_answer_is_not_counted() -> None:
    metrics = Metrics()
    assert answered(metrics, []) == []
    assert counted(metrics) == 0.0
