"""The endpoint's connections to its model server (``connections``, ``streams``) against a
scripted server on 127.0.0.1: keep-alive reuse, and a kept-alive connection the server
closed while it was idle. Every socket has a time-out; every server thread is joined."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.integration.test_endpoint import BOUND_S, Target, running_endpoint, upstream_at
from tests.support.upstream import loopback_socket


class Scripted:
    """A server answering each request with ``ok(n)`` (its n-th answer); after
    ``per_connection`` answers it closes that connection and sets ``closed``."""

    def __init__(self, answers: int, per_connection: int) -> None:
        self.answers = answers
        self.per_connection = per_connection
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
                    conn.sendall(ok(len(self.heads) - 1))
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


def ok(n: int) -> bytes:
    body = b"answer %d" % n
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


@contextmanager
def scripted(answers: int, per_connection: int) -> Iterator[Scripted]:
    server = Scripted(answers, per_connection)
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
