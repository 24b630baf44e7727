"""The endpoint under many connections that send nothing, or half a head, on 127.0.0.1: it
holds no more than its cap, closes the oldest idle one for a new one (a JSON 503 to one that
never sent a request), keeps answering ``/health``, and answers a JSON 503 when every
connection has a request in progress. Also in a process allowed fewer descriptors than the
connections opened: it never runs out of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import httpx

from nodeau.apps.endpoint.limits import Limits
from tests.support.real.endpoint import read_until_closed
from tests.support.real.idle_connections import BOUND_S, endpoint, eventually, health, opened
from tests.support.real.upstream import free_port

CAP = 64
IDLE = 300
ROOT = Path(__file__).resolve().parents[2]


def test_health_answers_while_hundreds_of_idle_connections_and_half_heads_are_open() -> None:
    half_head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    with endpoint(Limits(max_connections=CAP)) as (server, port), ExitStack() as stack:
        silent = opened(stack, port, IDLE // 2)
        opened(stack, port, IDLE // 2, send=half_head)
        eventually(
            "the endpoint holds at most its cap",
            lambda: len(server.server_state.connections) <= CAP + 1,
        )
        for _ in range(5):
            answer = health(port)
            assert answer.status_code == 200
            assert answer.json()["status"] == "ok"
        oldest = read_until_closed(silent[0])  # closed for a newer one
    head, _, body = oldest.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert json.loads(body)["error"]["type"] == "unavailable"


def test_a_kept_alive_client_reconnects_after_its_idle_connection_was_closed() -> None:
    """Once the endpoint has closed a client's idle kept-alive connection, the client sees
    the close before its next request and opens another. A request that crosses the close
    on the wire is reset instead: HTTP keep-alive's own race, which clients retry
    (docs/adr/0020-endpoint-limits.md)."""
    with (
        endpoint(Limits(max_connections=CAP)) as (server, port),
        ExitStack() as stack,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=BOUND_S) as client,
    ):
        assert client.get("/health").status_code == 200
        [kept_alive] = server.server_state.connections
        opened(stack, port, 2 * CAP)  # the client's idle connection is the oldest
        eventually(
            "the client's idle connection closed for a newer one",
            lambda: kept_alive not in server.server_state.connections,
        )
        assert client.get("/health").status_code == 200


def test_over_the_cap_with_every_connection_busy_a_request_is_a_json_503() -> None:
    cap = 4
    stalled = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
    stalled += b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    with endpoint(Limits(max_connections=cap)) as (server, port), ExitStack() as stack:
        busy = opened(stack, port, cap, send=stalled % port)  # each waits for its body
        eventually("every connection busy", lambda: len(server.server_state.tasks) == cap)
        refused = health(port)
        for sock in busy:
            sock.close()
        eventually("the busy ones gone", lambda: len(server.server_state.connections) == 0)
        again = health(port)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == {
        "message": f"this server has {cap} connections open, each with a request in progress "
        "(its most); try again when one has finished",
        "type": "unavailable",
        "code": 503,
    }
    assert again.status_code == 200


SERVE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))
from nodeau.apps.endpoint.serve import serve
serve(int(sys.argv[1]), lambda: None, log_level="warning")
"""


def test_an_endpoint_allowed_few_descriptors_keeps_answering_past_them(tmp_path: Path) -> None:
    """Allowed 512 open files, it is held to fewer connections than that (it says so in its
    log) and keeps answering with 700 connections opened to it."""
    port = free_port()
    log = tmp_path / "endpoint.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        eventually("the endpoint listens", lambda: _answers(port))
        with ExitStack() as stack:
            opened(stack, port, 700)
            answers = [health(port).status_code for _ in range(5)]
    finally:
        process.terminate()
        process.wait(BOUND_S)
    assert answers == [200] * 5
    assert "512 open files are allowed (the hard limit): at most" in log.read_text()


def _answers(port: int) -> bool:
    try:
        return health(port).status_code == 200
    except httpx.HTTPError:
        return False
