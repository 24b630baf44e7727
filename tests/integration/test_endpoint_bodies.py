"""What a proxied route takes (``nodeau.apps.endpoint.bodies``), under real uvicorn on
127.0.0.1 in front of the minimal upstream: a JSON object sent as ``application/json`` goes
through; anything else is a 400 from the endpoint that never reaches the upstream (which,
like llama-server, would have answered it with a 500). Then the official ``openai`` client,
with its retries on: a malformed request is sent once, not three times.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletion

from tests.support.real.endpoint import BOUND_S, MODEL, Target, running_endpoint, upstream_at
from tests.support.real.endpoint_requests import CHAT, Served, send
from tests.support.real.upstream import MinimalUpstream, free_port, running_upstream


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    upstream = MinimalUpstream(model=MODEL, chunk_delay_s=0.0)
    with running_upstream(upstream) as base, running_endpoint(Target(upstream_at(base))) as url:
        yield Served(upstream=upstream, port=int(url.rsplit(":", 1)[1]))


@pytest.fixture
def endpoint(served: Served) -> Served:
    served.upstream.arrived.clear()
    served.upstream.seen.clear()
    return served


def host(endpoint: Served) -> tuple[str, str]:
    return ("Host", f"127.0.0.1:{endpoint.port}")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b'{"messages": [{"role": "user", "content": "hi"}]}'),
        ("application/json; charset=utf-8", b'{"messages": [{"role": "user", "content": "hi"}]}'),
        ("Application/JSON", b' {"messages": [{"role": "user", "content": "hi"}]}\n'),
        ("application/json", b'{"messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'),
        ("application/json", b'{"messages": [{"role": "user", "content": "\\\\ud800"}]}'),
        ("application/json", '{"messages": [{"role": "user", "content": "é😀"}]}'.encode()),
    ],
    ids=["plain", "charset", "case", "escaped-pair", "escaped-backslash", "utf-8"],
)
def test_a_json_object_sent_as_json_goes_through_as_it_came(
    endpoint: Served, content_type: str, body: bytes
) -> None:
    answer = send(
        endpoint.port, "POST", CHAT, [host(endpoint), ("Content-Type", content_type)], body
    )
    assert answer.status == 200
    assert endpoint.upstream.arrived == ["POST /v1/chat/completions"]
    assert endpoint.upstream.seen[0].body == body


@pytest.mark.parametrize(
    ("content_types", "body", "message"),
    [
        (
            ["text/plain"],
            b'{"messages": []}',
            "POST /v1/chat/completions takes a JSON object sent with Content-Type: "
            "application/json; this request's is 'text/plain'",
        ),
        (
            ["application/x-www-form-urlencoded"],
            b'{"messages": []}',
            "POST /v1/chat/completions takes a JSON object sent with Content-Type: "
            "application/json; this request's is 'application/x-www-form-urlencoded'",
        ),
        (
            ["application/jsonx"],
            b'{"messages": []}',
            "POST /v1/chat/completions takes a JSON object sent with Content-Type: "
            "application/json; this request's is 'application/jsonx'",
        ),
        (
            [],
            b'{"messages": []}',
            "POST /v1/chat/completions takes a JSON object sent with Content-Type: "
            "application/json; this request has none",
        ),
        (
            ["application/json", "text/plain"],
            b'{"messages": []}',
            "POST /v1/chat/completions takes a JSON object sent with Content-Type: "
            "application/json; this request has 2",
        ),
        (
            ["application/json"],
            b'{"messages": [',
            "the request body is not valid JSON (Expecting value at line 1 column 15); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b"",
            "the request body is not valid JSON (Expecting value at line 1 column 1); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'{"messages": []} {"messages": []}',
            "the request body is not valid JSON (Extra data at line 1 column 18); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b"{'messages': []}",
            "the request body is not valid JSON (Expecting property name enclosed in double "
            "quotes at line 1 column 2); POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'{"temperature": NaN}',
            "the request body is not valid JSON (NaN is not a JSON value); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'{"temperature": Infinity}',
            "the request body is not valid JSON (Infinity is not a JSON value); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
            "the request body is not valid JSON (a string holds half of a UTF-16 surrogate "
            "pair); POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'{"messages": [{"role": "user", "content": "\xff"}]}',
            "the request body is not valid JSON (it is not UTF-8: invalid start byte at byte "
            "43); POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            '{"messages": []}'.encode("utf-16"),
            "the request body is not valid JSON (it is not UTF-8: invalid start byte at byte "
            "0); POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b"[" * 100_000,
            "the request body is not valid JSON (it is nested too deeply); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'{"seed": ' + b"1" * 5000 + b"}",
            "the request body is not valid JSON (Exceeds the limit (4300 digits) for integer "
            "string conversion: value has 5000 digits); POST /v1/chat/completions takes a "
            "JSON object",
        ),
        (
            ["application/json"],
            b'[{"role": "user", "content": "hi"}]',
            "the request body is JSON but not an object (it is an array); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b'"hi"',
            "the request body is JSON but not an object (it is a string); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b"42",
            "the request body is JSON but not an object (it is a number); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b"null",
            "the request body is JSON but not an object (it is null); "
            "POST /v1/chat/completions takes a JSON object",
        ),
        (
            ["application/json"],
            b"true",
            "the request body is JSON but not an object (it is true); "
            "POST /v1/chat/completions takes a JSON object",
        ),
    ],
    ids=[
        "text-plain",
        "form",
        "jsonx",
        "no-content-type",
        "two-content-types",
        "cut-short",
        "empty",
        "two-objects",
        "single-quotes",
        "nan",
        "infinity",
        "lone-surrogate",
        "not-utf-8",
        "utf-16",
        "too-deep",
        "huge-number",
        "array",
        "string",
        "number",
        "null",
        "true",
    ],
)
def test_a_malformed_request_is_a_400_and_never_reaches_the_upstream(
    endpoint: Served, content_types: list[str], body: bytes, message: str
) -> None:
    headers = [host(endpoint), *(("Content-Type", value) for value in content_types)]
    answer = send(endpoint.port, "POST", CHAT, headers, body)
    assert answer.status == 400
    assert answer.error() == {"message": message, "type": "invalid_request", "code": 400}
    assert endpoint.upstream.arrived == []


def test_every_proxied_route_checks_its_body(endpoint: Served) -> None:
    headers = [host(endpoint), ("Content-Type", "application/json")]
    answer = send(endpoint.port, "POST", "/v1/completions", headers, b'["once"]')
    assert answer.status == 400
    assert answer.error() == {
        "message": "the request body is JSON but not an object (it is an array); "
        "POST /v1/completions takes a JSON object",
        "type": "invalid_request",
        "code": 400,
    }
    assert endpoint.upstream.arrived == []


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_a_proxied_route_takes_post_only(endpoint: Served, method: str) -> None:
    headers = [host(endpoint), ("Content-Type", "application/json")]
    answer = send(endpoint.port, method, CHAT, headers, b'{"messages": []}')
    assert answer.status == 405
    assert dict(answer.headers)["allow"] == "POST"
    assert answer.error() == {
        "message": f"{method} is not answered on /v1/chat/completions; it takes POST",
        "type": "method_not_allowed",
        "code": 405,
    }
    assert endpoint.upstream.arrived == []


# -- the openai client's retries


def counting_client(url: str, attempts: list[str]) -> openai.OpenAI:
    """The official client with its default retries (2), noting each attempt it sends."""
    http = openai.DefaultHttpxClient(
        timeout=BOUND_S, event_hooks={"request": [lambda r: attempts.append(r.url.path)]}
    )
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", http_client=http)


def test_the_openai_client_sends_a_malformed_request_once(endpoint: Served) -> None:
    attempts: list[str] = []
    url = f"http://127.0.0.1:{endpoint.port}"
    with counting_client(url, attempts) as client, pytest.raises(openai.BadRequestError) as caught:
        client.post("/chat/completions", cast_to=ChatCompletion, content=b'{"messages": [')
    assert client.max_retries == 2
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": "the request body is not valid JSON (Expecting value at line 1 column 15); "
        "POST /v1/chat/completions takes a JSON object",
        "type": "invalid_request",
        "code": 400,
    }
    assert attempts == ["/v1/chat/completions"]
    assert endpoint.upstream.arrived == []


def test_the_openai_client_sends_a_json_array_once(endpoint: Served) -> None:
    attempts: list[str] = []
    url = f"http://127.0.0.1:{endpoint.port}"
    body = json.dumps([{"role": "user", "content": "hi"}]).encode()
    with counting_client(url, attempts) as client, pytest.raises(openai.BadRequestError):
        client.post("/chat/completions", cast_to=ChatCompletion, content=body)
    assert attempts == ["/v1/chat/completions"]
    assert endpoint.upstream.arrived == []


def test_the_attempts_counted_include_retries() -> None:
    """The same counting, against a 502 (no model server there), which the client retries:
    three attempts, so one attempt above is the client not retrying."""
    attempts: list[str] = []
    gone = f"http://127.0.0.1:{free_port()}"
    with (
        running_endpoint(Target(upstream_at(gone))) as url,
        counting_client(url, attempts) as client,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert attempts == ["/v1/chat/completions"] * 3
