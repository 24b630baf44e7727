"""``HttpBatchSender``, the batch workers' way to a model server, against a real HTTP server
on 127.0.0.1: an answer is a result with its status and body (JSON, or the text when it is
not JSON), an answer above 399 says so in its error, no answer is a result saying why,
the server's key goes with every request, and ``answering`` is true only for a 200.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from nodeau.adapters.batch_sender import HttpBatchSender
from nodeau.domain.batches import BatchRequest
from tests.support.real.upstream import free_port, loopback_socket, serving, upstream_config

KEY = {"Authorization": "Bearer k-123"}
health = {"status": 200}


async def completions(request: Request) -> Response:
    asked = await request.json()
    if asked.get("model") == "broken":
        return PlainTextResponse("no such model", status_code=404)
    said = {"echo": asked, "authorization": request.headers.get("authorization")}
    return JSONResponse(said)


async def healthz(_: Request) -> Response:
    return JSONResponse({"status": "ok"}, status_code=health["status"])


@pytest.fixture
def server() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/health", healthz),
        ]
    )
    sock = loopback_socket()
    with serving(uvicorn.Server(upstream_config(app)), sock):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    health["status"] = 200


def ask(line_no: int, model: str) -> BatchRequest:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    return BatchRequest(
        line_no=line_no, custom_id=f"r{line_no}", url="/v1/chat/completions", body=body
    )


def test_an_answer_is_a_result_with_its_status_body_and_the_key_sent(server: str) -> None:
    sender = HttpBatchSender(server, KEY)
    try:
        result = sender.send("job1", ask(3, "tiny"))
    finally:
        sender.close()
    assert (result.id, result.custom_id, result.status_code, result.error) == (
        "batch_req_job1_3",
        "r3",
        200,
        None,
    )
    assert isinstance(result.body, dict)
    assert result.body["echo"] == json.loads(json.dumps(ask(3, "tiny").body))
    assert result.body["authorization"] == "Bearer k-123"


def test_an_error_answer_keeps_its_text_and_says_its_status(server: str) -> None:
    sender = HttpBatchSender(server)
    try:
        result = sender.send("job1", ask(1, "broken"))
    finally:
        sender.close()
    assert (result.status_code, result.body) == (404, "no such model")
    assert result.error == "the model server answered 404"


def test_no_answer_is_a_result_saying_why_not_an_exception() -> None:
    sender = HttpBatchSender(f"http://127.0.0.1:{free_port()}")
    try:
        result = sender.send("job1", ask(2, "tiny"))
        answering = sender.answering()
    finally:
        sender.close()
    assert (result.custom_id, result.status_code, result.body) == ("r2", None, None)
    assert result.error  # the connection's own words
    assert answering is False


def test_answering_is_true_only_while_health_answers_200(server: str) -> None:
    sender = HttpBatchSender(server)
    try:
        first = sender.answering()
        health["status"] = 503  # llama-server while its model loads
        loading = sender.answering()
    finally:
        sender.close()
    assert (first, loading) == (True, False)
