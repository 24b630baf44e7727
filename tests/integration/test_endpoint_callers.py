"""Who the endpoint answers (``nodeau.apps.endpoint.callers``), under real uvicorn on 127.0.0.1.

Host and Origin rules, each request written byte for byte on a raw socket; a refused one never
reaches the upstream. Only an allowed origin's answers carry CORS headers (the upstream's own are
dropped, as llama-server adds one). Then ``--allow-origin`` as the endpoint process takes it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nodeau.domain.origins import parse_origin
from tests.support.real.endpoint import (
    BOUND_S,
    MODEL,
    ROOT,
    Target,
    record_workload,
    running_endpoint,
    upstream_at,
    wait_until_answering,
)
from tests.support.real.endpoint_requests import CHAT, Answer, Served, send
from tests.support.real.upstream import MinimalUpstream, free_port, running_upstream

ALLOWED = ("https://app.example", "chrome-extension://abcdefghijklmnop")
ASKED = b'{"messages": [{"role": "user", "content": "hi"}]}'
JSON = ("Content-Type", "application/json")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    upstream = MinimalUpstream(model=MODEL, chunk_delay_s=0.0)
    with (
        running_upstream(upstream) as base,
        running_endpoint(Target(upstream_at(base)), allowed_origins=ALLOWED) as url,
    ):
        yield Served(upstream=upstream, port=int(url.rsplit(":", 1)[1]))


@pytest.fixture
def endpoint(served: Served) -> Served:
    served.upstream.arrived.clear()
    served.upstream.seen.clear()
    return served


def assert_chat_answered(answer: Answer, upstream: MinimalUpstream) -> None:
    assert answer.status == 200
    assert json.loads(answer.body)["choices"][0]["message"]["content"] == "echo: hi"
    assert answer.cors_headers() == []  # the upstream's "access-control-allow-origin: *" dropped
    assert upstream.arrived == ["POST /v1/chat/completions"]


# -- Host


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LocalHost:{port}"]
)
def test_a_request_that_names_this_endpoint_as_its_host_is_served(
    endpoint: Served, host: str
) -> None:
    port = endpoint.port
    answer = send(port, "POST", CHAT, [("Host", host.format(port=port)), JSON], ASKED)
    assert_chat_answered(answer, endpoint.upstream)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",  # DNS rebinding: a page's own name, resolved to 127.0.0.1
        "localhost",  # no port: port 80, not this endpoint's
        "127.0.0.1",
        "[::1]",
        "127.0.0.1:{other}",
        "localhost.:{port}",
        "127.0.0.2:{port}",
        "192.168.1.20:{port}",
        "0.0.0.0:{port}",
        "localhost:{port}.evil.example",
        "",
    ],
)
def test_a_request_through_another_host_name_is_a_403_and_never_reaches_the_upstream(
    endpoint: Served, host: str
) -> None:
    port = endpoint.port
    named = host.format(port=port, other=port + 1 if port < 65535 else port - 1)
    answer = send(port, "POST", CHAT, [("Host", named), JSON], ASKED)
    assert answer.status == 403
    assert answer.error() == {
        "message": f"Host {named!r} is not this endpoint: it answers to Host 127.0.0.1:{port}, "
        f"localhost:{port} or [::1]:{port} only (a request through any other name is "
        "refused, against DNS rebinding)",
        "type": "forbidden",
        "code": 403,
    }
    assert answer.cors_headers() == []
    assert endpoint.upstream.arrived == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/embeddings"), ("GET", "/nothing")],
)
def test_the_host_rule_comes_before_every_route(endpoint: Served, method: str, path: str) -> None:
    answer = send(endpoint.port, method, path, [("Host", "evil.example"), JSON], b"{}")
    assert answer.status == 403
    assert answer.error() == {
        "message": f"Host 'evil.example' is not this endpoint: it answers to Host "
        f"127.0.0.1:{endpoint.port}, localhost:{endpoint.port} or [::1]:{endpoint.port} only "
        "(a request through any other name is refused, against DNS rebinding)",
        "type": "forbidden",
        "code": 403,
    }


def test_a_long_host_is_quoted_shortened(endpoint: Served) -> None:
    answer = send(endpoint.port, "GET", "/health", [("Host", "a" * 200)])
    assert answer.status == 403
    message = answer.error()["message"]
    assert message.startswith(f"Host {'a' * 80 + '...'!r} is not this endpoint: ")


def test_an_http_1_0_request_without_a_host_is_served(endpoint: Served) -> None:
    answer = send(endpoint.port, "POST", CHAT, [JSON], ASKED, version="HTTP/1.0")
    assert_chat_answered(answer, endpoint.upstream)


def test_an_http_1_1_request_without_a_host_is_a_400(endpoint: Served) -> None:
    port = endpoint.port
    answer = send(port, "POST", CHAT, [JSON], ASKED)
    assert answer.status == 400
    assert answer.error() == {
        "message": "the request has no Host header, which HTTP/1.1 requires; send Host: "
        f"127.0.0.1:{port}, localhost:{port} or [::1]:{port}",
        "type": "invalid_request",
        "code": 400,
    }
    assert endpoint.upstream.arrived == []


def test_a_request_with_two_hosts_is_a_400(endpoint: Served) -> None:
    port = endpoint.port
    hosts = [("Host", f"127.0.0.1:{port}"), ("Host", "evil.example")]
    answer = send(port, "POST", CHAT, [*hosts, JSON], ASKED)
    assert answer.status == 400
    assert answer.error() == {
        "message": "the request has more than one Host header",
        "type": "invalid_request",
        "code": 400,
    }
    assert endpoint.upstream.arrived == []


# -- Origin


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:5173",
        "http://localhost:3000",
        "http://[::1]:8080",
        "http://localhost",
        "http://127.0.0.1:{port}",  # a page the endpoint itself would serve
        "https://app.example",  # allowed at start
        "chrome-extension://abcdefghijklmnop",  # allowed at start
    ],
)
def test_a_request_from_a_loopback_or_allowed_origin_is_served_and_readable_by_its_page(
    endpoint: Served, origin: str
) -> None:
    port = endpoint.port
    page = origin.format(port=port)
    headers = [("Host", f"localhost:{port}"), ("Origin", page), JSON]
    answer = send(port, "POST", CHAT, headers, ASKED)
    assert answer.status == 200
    assert json.loads(answer.body)["choices"][0]["message"]["content"] == "echo: hi"
    assert answer.readable_by(page), answer.headers  # the upstream's "*" replaced by the page
    assert answer.header("access-control-expose-headers") == ["Retry-After"]
    assert endpoint.upstream.arrived == ["POST /v1/chat/completions"]
    assert endpoint.upstream.seen[0].header("origin") == []  # not sent on upstream


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "https://evil.example:8443",
        "null",  # sandboxed frames, file: pages
        "http://localhost.evil.example:3000",
        "http://127.0.0.1.evil.example",
        "http://192.168.1.20:3000",
        "https://localhost:3000",  # loopback pages are http:// ones; https needs --allow-origin
        "http://app.example",  # https://app.example is allowed, not this
        "https://app.example:8443",
        "chrome-extension://zzzzzzzzzzzzzzzz",
        "http://[::1]x",
    ],
)
def test_a_request_from_another_web_origin_is_a_403_and_never_reaches_the_upstream(
    endpoint: Served, origin: str
) -> None:
    port = endpoint.port
    answer = send(
        port, "POST", CHAT, [("Host", f"127.0.0.1:{port}"), ("Origin", origin), JSON], ASKED
    )
    assert answer.status == 403
    assert answer.error() == {
        "message": f"requests from the web origin {origin!r} are refused: this endpoint "
        "serves programs on this machine and pages from http://127.0.0.1, http://localhost or "
        "http://[::1] (any port); another origin is served only by an endpoint started with "
        "--allow-origin ORIGIN",
        "type": "forbidden",
        "code": 403,
    }
    assert answer.cors_headers() == []
    assert endpoint.upstream.arrived == []


def test_a_drive_by_text_plain_post_from_a_web_page_is_a_403(endpoint: Served) -> None:
    """What a page can send without a preflight (CVE-2024-28224): refused for its origin
    before its content type is even looked at."""
    port = endpoint.port
    headers = [
        ("Host", f"127.0.0.1:{port}"),
        ("Origin", "http://evil.example"),
        ("Content-Type", "text/plain;charset=UTF-8"),
    ]
    answer = send(port, "POST", CHAT, headers, ASKED)
    assert answer.status == 403
    assert answer.error() == {
        "message": "requests from the web origin 'http://evil.example' are refused: this "
        "endpoint serves programs on this machine and pages from http://127.0.0.1, "
        "http://localhost or http://[::1] (any port); another origin is served only by an "
        "endpoint started with --allow-origin ORIGIN",
        "type": "forbidden",
        "code": 403,
    }
    assert endpoint.upstream.arrived == []


def test_a_rebound_page_is_refused_for_its_host_first(endpoint: Served) -> None:
    port = endpoint.port
    headers = [("Host", f"evil.example:{port}"), ("Origin", f"http://evil.example:{port}"), JSON]
    answer = send(port, "POST", CHAT, headers, ASKED)
    assert answer.status == 403
    assert answer.error() == {
        "message": f"Host 'evil.example:{port}' is not this endpoint: it answers to Host "
        f"127.0.0.1:{port}, localhost:{port} or [::1]:{port} only (a request through any "
        "other name is refused, against DNS rebinding)",
        "type": "forbidden",
        "code": 403,
    }
    assert endpoint.upstream.arrived == []


def preflight_headers(port: int, origin: str, asked: str = "content-type") -> list[tuple[str, str]]:
    return [
        ("Host", f"127.0.0.1:{port}"),
        ("Origin", origin),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", asked),
    ]


@pytest.mark.parametrize("origin", ["http://evil.example", "https://localhost:3000", "null"])
def test_a_preflight_from_another_origin_is_a_403_with_no_cors_allowance(
    endpoint: Served, origin: str
) -> None:
    answer = send(endpoint.port, "OPTIONS", CHAT, preflight_headers(endpoint.port, origin))
    assert answer.status == 403
    assert answer.error()["type"] == "forbidden"
    assert answer.cors_headers() == []
    assert endpoint.upstream.arrived == []


SDK_HEADERS = (
    "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,"
    "x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
    "x-stainless-runtime-version,x-stainless-timeout"
)  # what the openai JavaScript SDK asks for, as chromium sends it


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://[::1]:8080", *ALLOWED])
@pytest.mark.parametrize("path", [CHAT, "/v1/embeddings", "/v1/models", "/health"])
def test_a_preflight_from_an_allowed_origin_allows_get_post_and_the_headers_asked(
    endpoint: Served, origin: str, path: str
) -> None:
    headers = preflight_headers(endpoint.port, origin, SDK_HEADERS)
    answer = send(endpoint.port, "OPTIONS", path, headers)
    assert answer.status == 204
    assert answer.readable_by(origin)
    assert answer.header("access-control-allow-methods") == ["GET, POST"]
    assert answer.header("access-control-allow-headers") == [SDK_HEADERS]
    assert answer.header("access-control-max-age") == ["600"]
    assert answer.body == b""
    assert endpoint.upstream.arrived == [], "a preflight is answered by the endpoint itself"


@pytest.mark.parametrize("asked", ["content-type, x-a;b", "a b", "x" * 5000, ",", "a,,b"])
def test_a_preflight_asking_for_what_is_not_header_names_is_allowed_none(
    endpoint: Served, asked: str
) -> None:
    headers = preflight_headers(endpoint.port, "http://localhost:3000", asked)
    answer = send(endpoint.port, "OPTIONS", CHAT, headers)
    assert answer.status == 204
    assert answer.header("access-control-allow-headers") == []


def test_a_preflight_from_an_allowed_public_page_may_reach_this_private_address(
    endpoint: Served,
) -> None:
    headers = preflight_headers(endpoint.port, "https://app.example")
    headers.append(("Access-Control-Request-Private-Network", "true"))
    answer = send(endpoint.port, "OPTIONS", CHAT, headers)
    assert answer.status == 204
    assert answer.header("access-control-allow-private-network") == ["true"]


@pytest.mark.parametrize("origin", ["http://localhost:3000", "https://app.example"])
def test_options_that_is_no_preflight_is_still_a_405(endpoint: Served, origin: str) -> None:
    headers = [("Host", f"127.0.0.1:{endpoint.port}"), ("Origin", origin)]
    answer = send(endpoint.port, "OPTIONS", CHAT, headers)
    assert answer.status == 405
    message = answer.error()["message"]
    assert message == "OPTIONS is not answered on /v1/chat/completions; it takes POST"
    assert answer.readable_by(origin), "the page may read why"


@pytest.mark.parametrize("path", ["/health", "/v1/models", f"/v1/models/{MODEL}"])
def test_the_endpoint_own_answers_are_readable_by_an_allowed_page(
    endpoint: Served, path: str
) -> None:
    page = "http://localhost:3000"
    host = ("Host", f"localhost:{endpoint.port}")
    answer = send(endpoint.port, "GET", path, [host, ("Origin", page)])
    assert answer.status == 200
    assert answer.readable_by(page)
    program = send(endpoint.port, "GET", path, [host])
    assert program.status == 200
    assert program.cors_headers() == [], "a program's request (no Origin) gets no CORS header"


# -- the allowed origins, as the endpoint process takes them


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://App.Example", "https://app.example"),
        ("https://app.example:443", "https://app.example"),
        ("http://app.example:80/", "http://app.example"),
        ("http://app.example:8080", "http://app.example:8080"),
        (" app://obsidian.md ", "app://obsidian.md"),
        ("chrome-extension://abcdefghijklmnop", "chrome-extension://abcdefghijklmnop"),
        ("http://[::1]:3000", "http://[::1]:3000"),
    ],
)
def test_an_allowed_origin_is_kept_as_a_browser_sends_it(given: str, origin: str) -> None:
    assert parse_origin(given) == origin


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("*", "'*' cannot be allowed: name each origin, as scheme://host[:port]"),
        ("null", "'null' cannot be allowed: name each origin, as scheme://host[:port]"),
        ("app.example", "'app.example' is not an origin: scheme://host[:port], nothing more"),
        ("localhost:3000", "'localhost:3000' is not an origin: scheme://host[:port], nothing more"),
        (
            "https://app.example/chat",
            "'https://app.example/chat' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://app.example?x=1",
            "'https://app.example?x=1' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://me@app.example",
            "'https://me@app.example' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "file:///tmp/page.html",
            "'file:///tmp/page.html' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "http://app.example:99999",
            "'http://app.example:99999' is not an origin (Port out of range 0-65535)",
        ),
    ],
)
def test_what_is_not_an_origin_cannot_be_allowed(given: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_origin(given)
    assert str(caught.value) == message


@pytest.mark.slow
def test_the_endpoint_process_refuses_a_wildcard_origin(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "nodeau.apps.endpoint", "--workload", MODEL]
    command += ["--port", str(free_port()), "--state", str(tmp_path / "state.sqlite3")]
    command += ["--allow-origin", "*"]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=BOUND_S, check=False
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "python -m nodeau.apps.endpoint: error: argument --allow-origin: '*' cannot be "
        "allowed: name each origin, as scheme://host[:port]"
    )
    assert not (tmp_path / "state.sqlite3").exists()


@pytest.mark.slow
def test_the_endpoint_process_serves_the_origins_it_was_started_to_allow(tmp_path: Path) -> None:
    upstream = MinimalUpstream(model=MODEL)
    port = free_port()
    with running_upstream(upstream) as base:
        record_workload(tmp_path / "state.sqlite3", MODEL, base)
        command = [sys.executable, "-m", "nodeau.apps.endpoint", "--workload", MODEL]
        command += ["--port", str(port), "--state", str(tmp_path / "state.sqlite3")]
        command += ["--allow-origin", "https://app.example", "--allow-origin", "app://obsidian.md"]
        command += ["--log-level", "warning"]
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL)
        try:
            wait_until_answering(f"http://127.0.0.1:{port}", process)
            answers = {
                origin: httpx.post(
                    f"http://127.0.0.1:{port}{CHAT}",
                    json={"messages": [{"role": "user", "content": "hi"}]},
                    headers={"Origin": origin},
                    timeout=BOUND_S,
                )
                for origin in ("https://app.example", "app://obsidian.md", "https://evil.example")
            }
        finally:
            process.terminate()
            process.wait(BOUND_S)
    assert {origin: a.status_code for origin, a in answers.items()} == {
        "https://app.example": 200,
        "app://obsidian.md": 200,
        "https://evil.example": 403,
    }
    assert {o: a.headers.get("access-control-allow-origin") for o, a in answers.items()} == {
        "https://app.example": "https://app.example",
        "app://obsidian.md": "app://obsidian.md",
        "https://evil.example": None,
    }
    assert upstream.arrived == ["POST /v1/chat/completions"] * 2
