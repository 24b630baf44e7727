"""The dashboard as its service serves it (``dashboard.server``), on 127.0.0.1: before its
token is looked at, a request's head is bounded in size (431) and in time (408); many idle
connections and half-sent heads leave it answering ``/health`` (without the token) and the
board (with it), holding no more connections than its cap; an absolute-form request for
another host is refused as the Host rule refuses it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import cast

import httpx
import pytest
import uvicorn

from nodeau.adapters.dashboard_token import TokenFile, write_owner_only
from nodeau.adapters.endpoint_client import HttpxEndpointClient
from nodeau.apps.dashboard.app import create_app
from nodeau.apps.dashboard.server import dashboard_config
from nodeau.apps.endpoint.limits import Limits
from nodeau.apps.endpoint.request_head import MAX_HEAD_BYTES
from nodeau.apps.planes.plane import Plane
from nodeau.ports.errors import NodeauError
from tests.support.builders.dashboard_views import NOW, FakePlane, fleet, machine, plan
from tests.support.real.endpoint import raw_exchange, read_until_closed
from tests.support.real.idle_connections import eventually, opened
from tests.support.real.upstream import bound_port, serving

CAP = 32
IDLE = 200
TIMEOUT_S = 0.5
BOUND_S = 10.0
BEARER = {"Authorization": "Bearer the-token"}


@contextmanager
def dashboard(tmp_path: Path, limits: Limits) -> Iterator[tuple[uvicorn.Server, str]]:
    token = tmp_path / "token"
    write_owner_only(token, b"the-token")
    plane = FakePlane(
        machines=fleet(machine("box-a")),
        workloads=(),
        batches=(),
        copies=NodeauError("no copies on one machine"),
        recovery=NodeauError("none"),
        plan=plan(),
    )
    app = create_app(
        cast(Plane, plane),
        client=HttpxEndpointClient(),
        model_rows=lambda: (),
        token=TokenFile(token),
        clock=lambda: NOW,
    )
    server = uvicorn.Server(dashboard_config(app, 0, log_level="error", limits=limits))
    with serving(server):
        yield server, f"http://127.0.0.1:{bound_port(server)}"


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_health_and_the_board_answer_while_many_idle_connections_are_open(
    tmp_path: Path,
) -> None:
    half_head = b"GET /api/board HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
    with dashboard(tmp_path, Limits(max_connections=CAP)) as (server, url), ExitStack() as s:
        opened(s, port_of(url), IDLE // 2)
        opened(s, port_of(url), IDLE // 2, send=half_head)
        eventually(
            "the dashboard holds at most its cap",
            lambda: len(server.server_state.connections) <= CAP + 1,
        )
        health = httpx.get(f"{url}/health", timeout=BOUND_S, trust_env=False)
        board = httpx.get(f"{url}/api/board", headers=BEARER, timeout=BOUND_S, trust_env=False)
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
    assert board.status_code == 200


def test_health_needs_no_token_and_everything_else_still_does(tmp_path: Path) -> None:
    with dashboard(tmp_path, Limits()) as (_, url):
        health = httpx.get(f"{url}/health", timeout=BOUND_S, trust_env=False)
        board = httpx.get(f"{url}/api/board", timeout=BOUND_S, trust_env=False)
        elsewhere = httpx.get(
            f"{url}/health", headers={"Host": "evil.example"}, timeout=BOUND_S, trust_env=False
        )
    assert health.status_code == 200
    assert board.status_code == 401
    assert elsewhere.status_code == 403


def test_a_head_past_the_bound_is_a_json_431_before_the_token_is_looked_at(
    tmp_path: Path,
) -> None:
    with dashboard(tmp_path, Limits()) as (_, url):
        request = b"GET /api/board HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: " % port_of(url)
        answer = raw_exchange(url, request + b"v" * (4 * MAX_HEAD_BYTES) + b"\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert json.loads(body)["error"]["type"] == "request_too_large"


def test_half_a_head_is_closed_with_a_json_408(tmp_path: Path) -> None:
    limits = Limits(head_timeout_s=TIMEOUT_S)
    with (
        dashboard(tmp_path, limits) as (_, url),
        socket.create_connection(("127.0.0.1", port_of(url)), timeout=10 * TIMEOUT_S) as sock,
    ):
        sock.sendall(b"GET /api/board HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["error"]["type"] == "timeout"


@pytest.mark.parametrize("target", [b"http://evil.example/api/session", b"http://evil.example/"])
def test_an_absolute_target_for_another_host_is_refused(tmp_path: Path, target: bytes) -> None:
    with dashboard(tmp_path, Limits()) as (_, url):
        request = b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
        answer = raw_exchange(url, request % (target, port_of(url)) + b"\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 ")
    assert json.loads(body)["error"]["type"] == "forbidden"
