"""The endpoint's bound on a request's head (``nodeau.apps.endpoint.request_head``), under
real uvicorn on 127.0.0.1 as ``serve`` configures it: over the bound is a JSON 431 however the
head arrives; heads under it are served, one after another on a kept-alive connection."""

from __future__ import annotations

import json
import socket
from contextlib import suppress

from nodeau.apps.endpoint.request_head import MAX_HEAD_BYTES
from tests.support.real.endpoint import (
    BOUND_S,
    Target,
    read_until_closed,
    running_endpoint,
    still_serves,
)


def test_a_head_sent_in_small_pieces_past_the_bound_is_a_431() -> None:
    with running_endpoint(Target()) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            sent = 0
            try:
                while sent <= MAX_HEAD_BYTES + 1024:
                    sock.sendall(b"X-Piece-%d: %s\r\n" % (sent, b"v" * 500))
                    sent += 500
            except OSError:
                pass  # closed once the bound was passed
            answer = read_until_closed(sock)
        still_serves(url)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b"\r\nconnection: close" in head
    assert json.loads(body)["error"] == {
        "message": f"the request line and headers are larger than this endpoint accepts "
        f"({MAX_HEAD_BYTES // 1024} KiB)",
        "type": "request_too_large",
        "code": 431,
    }


def test_a_long_request_line_is_a_431() -> None:
    with running_endpoint(Target()) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
            with suppress(OSError):  # closed once the bound was passed
                sock.sendall(b"GET /health?" + b"q" * (2 * MAX_HEAD_BYTES) + b" HTTP/1.1\r\n")
            answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 431 ")


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer with a Content-Length, read off a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    (length,) = (
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_heads_under_the_bound_are_served_one_after_another_on_one_connection() -> None:
    """Each head is most of the bound: counted together they would pass it."""
    with running_endpoint(Target()) as url:
        port = int(url.rsplit(":", 1)[1])
        request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: %s\r\n\r\n" % (
            port,
            b"v" * (MAX_HEAD_BYTES - 2048),
        )
        with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
            answers = []
            for _ in range(5):
                sock.sendall(request)
                answers.append(read_answer(sock))
    assert all(a.startswith(b"HTTP/1.1 200 ") for a in answers)
    assert all(json.loads(a.partition(b"\r\n\r\n")[2])["status"] == "ok" for a in answers)
