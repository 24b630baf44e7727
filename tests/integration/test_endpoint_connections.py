"""The endpoint's connections to its model server (``connections``, ``model_server``) against
a scripted server on 127.0.0.1: keep-alive reuse, a kept-alive connection the server closed
while it was idle or said it would close, answers framed every way and sent in pieces,
garbage, and a full pool. Every socket has a time-out; every server thread is joined."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest

from nodeau.apps.endpoint.connections import ModelServerConnections
from tests.support.real.endpoint import (
    BOUND_S,
    MODEL,
    Target,
    running_endpoint,
    still_serves,
    upstream_at,
)
from tests.support.real.upstream import MinimalUpstream, loopback_socket, running_upstream

PIECE_GAP_S = 0.005  # between the pieces of one answer, so that they arrive apart


def ok(n: int) -> list[bytes]:
    body = b"answer %d" % n
    return [b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)]


class Scripted:
    """A server answering each request with ``answer(n)`` (its n-th answer, sent in those
    pieces); after ``per_connection`` answers it closes that connection and sets
    ``closed``. A connection the endpoint closes first ends early."""

    def __init__(
        self,
        answers: int,
        per_connection: int,
        answer: Callable[[int], list[bytes]] = ok,
    ) -> None:
        self.answers = answers
        self.per_connection = per_connection
        self.answer = answer
        self.connections = 0
        self.heads: list[bytes] = []
        self.closed = threading.Event()
        self.sock = loopback_socket()
        self.sock.listen(8)
        self.sock.settimeout(BOUND_S)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        while len(self.heads) < self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(BOUND_S)
                for _ in range(self.per_connection):
                    if not self._read_request(conn):
                        break
                    for i, piece in enumerate(self.answer(len(self.heads) - 1)):
                        if i:
                            time.sleep(PIECE_GAP_S)
                        conn.sendall(piece)
            self.closed.set()

    def _read_request(self, conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            body += conn.recv(65536)
        self.heads.append(head)
        return True


@contextmanager
def scripted(
    answers: int, per_connection: int, answer: Callable[[int], list[bytes]] = ok
) -> Iterator[Scripted]:
    server = Scripted(answers, per_connection, answer)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.sock.close()
        thread.join(BOUND_S)
    assert not thread.is_alive()


def test_a_kept_alive_connection_is_reused_and_one_the_server_closed_is_not() -> None:
    """The server answers two requests on its first connection and then closes it; the
    third request must go out on a new connection, not on the closed one (a 502)."""
    with (
        scripted(answers=3, per_connection=2) as server,
        running_endpoint(Target(upstream_at(server.url))) as url,
        httpx.Client(timeout=BOUND_S) as client,
    ):
        answers = []
        for n in range(3):
            if n == 2:
                assert server.closed.wait(BOUND_S)
            response = client.post(f"{url}/v1/completions", json={"prompt": str(n)})
            answers.append((response.status_code, response.text))
    assert answers == [(200, "answer 0"), (200, "answer 1"), (200, "answer 2")]
    assert server.connections == 2
    assert [head.split(b"\r\n")[0] for head in server.heads] == [
        b"POST /v1/completions HTTP/1.1"
    ] * 3


def test_a_query_string_is_sent_upstream_percent_encoded_as_httpx_does() -> None:
    with (
        scripted(answers=1, per_connection=1) as server,
        running_endpoint(Target(upstream_at(server.url))) as url,
    ):
        response = httpx.post(
            f"{url}/v1/completions?a=1&b=x%20y", json={"prompt": "q"}, timeout=BOUND_S
        )
    assert response.status_code == 200
    assert server.heads[0].split(b"\r\n")[0] == b"POST /v1/completions?a=1&b=x%20y HTTP/1.1"


def test_a_connection_the_server_said_it_would_close_is_not_reused() -> None:
    """The server keeps the connection open after its ``Connection: close`` answer: only a
    second connection for the second request shows the endpoint believed it."""

    def closing(n: int) -> list[bytes]:
        body = b"answer %d" % n
        return [
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body)
        ]

    with (
        scripted(answers=2, per_connection=2, answer=closing) as server,
        running_endpoint(Target(upstream_at(server.url))) as url,
        httpx.Client(timeout=BOUND_S) as client,
    ):
        answers = [
            client.post(f"{url}/v1/completions", json={"prompt": str(n)}).text for n in range(2)
        ]
    assert answers == ["answer 0", "answer 1"]
    assert server.connections == 2


STREAM = [b'data: {"n": %d}\n\n' % i for i in range(6)] + [b"data: [DONE]\n\n"]
FRAMED = {
    "content-length": [
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-len",
        b"gth: %d\r\n\r\n%s" % (len(b"".join(STREAM)), b"".join(STREAM)[:9]),
        b"".join(STREAM)[9:],
    ],
    "chunked": [
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        *(b"%x\r\n%s\r\n" % (len(event), event) for event in STREAM),
        b"0\r\n\r\n",
    ],
    "until-close": [b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n", *STREAM],
}


@pytest.mark.parametrize("framing", FRAMED)
def test_an_answer_in_pieces_reaches_the_client_byte_for_byte(framing: str) -> None:
    """Each framing, its pieces sent apart (the last two framings one event per piece); the
    server closes after answering, which ends the "until-close" answer."""
    with (
        scripted(answers=1, per_connection=1, answer=lambda n: FRAMED[framing]) as server,
        running_endpoint(Target(upstream_at(server.url))) as url,
    ):
        response = httpx.post(f"{url}/v1/completions", json={"prompt": "p"}, timeout=BOUND_S)
        still_serves(url)
    assert response.status_code == 200
    assert response.content == b"".join(STREAM)
    if framing == "content-length":
        assert response.headers["content-length"] == str(len(b"".join(STREAM)))
    else:
        assert "content-length" not in response.headers


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ([b"SSH-2.0-OpenSSH_9.6\r\n"], "its answer is not valid HTTP/1.1: Expected HTTP/"),
        ([b"HTTP/1.1 200 OK\r\nX: a\nb\r\n\r\n"], "its answer is not valid HTTP/1.1: "),
        ([], "it closed the connection without an answer"),
    ],
    ids=["not-http", "bad-header", "nothing"],
)
def test_an_upstream_that_does_not_answer_in_http_is_a_502_naming_it(
    answer: list[bytes], why: str
) -> None:
    with (
        scripted(answers=1, per_connection=1, answer=lambda n: answer) as server,
        running_endpoint(Target(upstream_at(server.url))) as url,
    ):
        response = httpx.post(f"{url}/v1/completions", json={"prompt": "p"}, timeout=BOUND_S)
        still_serves(url)
        base = server.url
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("bad_gateway", 502)
    assert error["message"].startswith(f"no valid answer from the model server at {base}: {why}")
    assert "\n" not in error["message"]


def test_a_full_pool_is_a_503_and_the_held_request_still_gets_its_answer() -> None:
    """One connection allowed: a second request while the first is held waits for the pool
    time-out and is told the model server is too busy; the first is answered once released."""
    upstream = MinimalUpstream(model=MODEL)
    upstream.gate = threading.Event()
    connections = ModelServerConnections(
        max_connections=1,
        max_idle=1,
        keepalive_expiry_s=4.0,
        connect_timeout_s=BOUND_S,
        write_timeout_s=BOUND_S,
        pool_timeout_s=0.2,
    )
    first: list[httpx.Response] = []
    with (
        running_upstream(upstream) as base,
        running_endpoint(Target(upstream_at(base)), connections=connections) as url,
    ):
        chat = f"{url}/v1/chat/completions"
        held = threading.Thread(
            target=lambda: first.append(httpx.post(chat, json={"messages": []}, timeout=BOUND_S))
        )
        held.start()
        deadline = time.monotonic() + BOUND_S
        while upstream.waits != ["waiting"] and time.monotonic() < deadline:
            time.sleep(0.01)
        second = httpx.post(chat, json={"messages": []}, timeout=BOUND_S)
        upstream.gate.set()
        held.join(BOUND_S)
    assert second.status_code == 503
    assert second.json()["error"]["message"] == (
        f"too many requests in flight to the model server at {base}; none finished within 0.2 s"
    )
    assert [r.status_code for r in first] == [200]
    assert upstream.waits == ["released"]
