"""The endpoint closes what a client leaves half-sent, on 127.0.0.1 with short time-outs set
for the test: half a head, a head then half a body (each a JSON 408), a connection that sends
nothing (closed), and a body arriving while others fill the memory kept for bodies (a JSON
503). A request sent whole, slowly but within the time-outs, is answered. Each test waits at
most ten times the time-out it set."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from nodeau.apps.endpoint.limits import Limits
from tests.support.real.endpoint import read_until_closed
from tests.support.real.idle_connections import endpoint, health

TIMEOUT_S = 0.5
WAIT_S = 10 * TIMEOUT_S
SHORT = Limits(head_timeout_s=TIMEOUT_S, body_timeout_s=TIMEOUT_S)


@contextmanager
def connected(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        yield sock


def error_of(answer: bytes) -> tuple[bytes, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"\r\ncontent-type: application/json\r\n" in head
    return head.split(b"\r\n", 1)[0], json.loads(body)["error"]


def test_half_a_head_is_closed_with_a_json_408() -> None:
    with endpoint(SHORT) as (_, port), connected(port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: " % port)
        answer = read_until_closed(sock)  # raises TimeoutError if never closed
        still = health(port)
    status, error = error_of(answer)
    assert status == b"HTTP/1.1 408 Request Timeout"
    assert error == {
        "message": f"the request line and headers did not arrive within {TIMEOUT_S:g} s",
        "type": "timeout",
        "code": 408,
    }
    assert still.status_code == 200


def test_half_a_head_after_a_kept_alive_answer_is_closed_too() -> None:
    whole = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
    with endpoint(SHORT) as (_, port), connected(port) as sock:
        sock.sendall(whole % port + b"GET /health HTTP/1.1\r\n")
        answer = read_until_closed(sock)
    first, _, second = answer.partition(b"HTTP/1.1 408 ")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b'"type":"timeout"' in second


def test_a_connection_that_sends_nothing_is_closed() -> None:
    with endpoint(SHORT) as (_, port), connected(port) as sock:
        assert read_until_closed(sock) == b""


def test_half_a_body_is_closed_with_a_json_408() -> None:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with endpoint(SHORT) as (_, port), connected(port) as sock:
        sock.sendall(head % port + b'{"messages": [')
        answer = read_until_closed(sock)
    status, error = error_of(answer)
    assert status == b"HTTP/1.1 408 Request Timeout"
    assert error == {
        "message": f"the request body did not arrive whole within {TIMEOUT_S:g} s of its headers",
        "type": "timeout",
        "code": 408,
    }


def test_a_head_sent_slowly_within_the_time_out_is_answered() -> None:
    limits = Limits(head_timeout_s=WAIT_S)
    with endpoint(limits) as (_, port), connected(port) as sock:
        for piece in (b"GET /health HTTP/1.1\r\n", b"Host: 127.0.0.1:%d\r\n" % port, b"\r\n"):
            sock.sendall(piece)
            time.sleep(0.1)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")


def test_bodies_past_the_memory_for_arriving_bodies_are_a_json_503_and_it_is_freed() -> None:
    """Bodies arriving together are counted as one: here one body is more than all of them
    may hold (1 MiB for the test)."""
    limits = Limits(max_arriving_body_bytes=1024 * 1024)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    )
    body = b" " * (1536 * 1024)
    with endpoint(limits) as (_, port):
        with connected(port) as sock:
            with suppress(OSError):  # closed before it took all
                sock.sendall(head % (port, 2 * len(body)) + body)
            answer = read_until_closed(sock)
        with connected(port) as sock:
            sock.sendall(
                head.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n") % (port, 2) + b"{}"
            )
            after = read_until_closed(sock)
    status, error = error_of(answer)
    assert status == b"HTTP/1.1 503 Service Unavailable"
    assert error["message"] == (
        "request bodies arriving now pass what this server holds at once (1 MiB in all); "
        "send it again in a moment"
    )
    status, error = error_of(after)
    assert status == b"HTTP/1.1 502 Bad Gateway"  # taken, then sent on: nothing listens there
