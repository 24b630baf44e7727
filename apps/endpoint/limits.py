"""What one local HTTP server (the endpoint, the dashboard) lets its clients hold: connections,
time to send a request, memory for bodies still arriving; and its refusals, bytes on the wire.

The protocol (``request_head.BoundedHeadProtocol``) carries these out; the reasons for the
figures and for not using uvicorn's ``limit_concurrency`` are in docs/adr/0020-endpoint-limits.md.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from attrs import frozen

MAX_CONNECTIONS = 1024
HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
KEEP_ALIVE_S = 75  # longer than common clients' idle pools, so they rarely meet a closed socket
MAX_ARRIVING_BODY_BYTES = 256 * 1024 * 1024
SPARE_DESCRIPTORS = 128  # SQLite, logs, the watcher's reads, the listening socket


@frozen(kw_only=True)
class Limits:
    """A server's limits: open connections; seconds for a request's head (from its first
    byte, or from the connection's opening) and for its body (from the end of its head);
    seconds a kept-alive connection waits for its next request; bytes of request bodies
    arriving at once, on all connections together."""

    max_connections: int = MAX_CONNECTIONS
    head_timeout_s: float = HEAD_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    keep_alive_s: int = KEEP_ALIVE_S
    max_arriving_body_bytes: int = MAX_ARRIVING_BODY_BYTES


def descriptors_needed(connections: int, upstream_in_flight: int, upstream_idle: int) -> int:
    """File descriptors a server holding ``connections`` may need at once: one each, one
    more per request in flight to a model server (at most ``upstream_in_flight``),
    ``upstream_idle`` kept-alive ones to it, the listening socket, and the spare ones."""
    return (
        connections + min(connections, upstream_in_flight) + upstream_idle + 1 + SPARE_DESCRIPTORS
    )


def connections_that_fit(descriptors: int, upstream_in_flight: int, upstream_idle: int) -> int:
    """The most connections (at least 1) whose ``descriptors_needed`` fit ``descriptors``."""
    free = descriptors - upstream_idle - 1 - SPARE_DESCRIPTORS
    if free >= 2 * upstream_in_flight:
        return free - upstream_in_flight
    return max(1, free // 2)


class Shared:
    """What the connections of one server share: all of them, the one whose last request
    began longest ago (or that opened longest ago) first, and how many body bytes are
    arriving on all of them."""

    def __init__(self) -> None:
        self.order: OrderedDict[Any, None] = OrderedDict()
        self.arriving_body_bytes = 0


def _answer(status: bytes, message: str, kind: str, code: int, extra: bytes = b"") -> bytes:
    body = json.dumps(
        {"error": {"message": message, "type": kind, "code": code}}, separators=(",", ":")
    ).encode()
    return (
        b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n%scontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (status, extra, len(body), body)
    )


def not_http(reason: str) -> bytes:
    """The whole 400 of bytes that are not an HTTP/1.1 request (llhttp's ``reason``)."""
    return _answer(
        b"400 Bad Request",
        f"the request is not valid HTTP/1.1 ({reason.rstrip('.')}); "
        "send a request line, headers and a blank line",
        "invalid_request",
        400,
    )


def head_timed_out(timeout_s: float) -> bytes:
    """The whole 408 of a request whose head did not arrive whole in time."""
    return _answer(
        b"408 Request Timeout",
        f"the request line and headers did not arrive within {timeout_s:g} s",
        "timeout",
        408,
    )


def body_timed_out(timeout_s: float) -> bytes:
    """The whole 408 of a request whose body did not arrive whole in time."""
    return _answer(
        b"408 Request Timeout",
        f"the request body did not arrive whole within {timeout_s:g} s of its headers",
        "timeout",
        408,
    )


def too_many_connections(limit: int) -> bytes:
    """The whole 503 of a connection over the cap, every other one with a request in
    progress."""
    return _answer(
        b"503 Service Unavailable",
        f"this server has {limit} connections open, each with a request in progress "
        "(its most); try again when one has finished",
        "unavailable",
        503,
        b"retry-after: 1\r\n",
    )


def too_many_bodies(limit: int) -> bytes:
    """The whole 503 of a body arriving while others already fill the memory for them."""
    return _answer(
        b"503 Service Unavailable",
        f"request bodies arriving now pass what this server holds at once "
        f"({limit // (1024 * 1024)} MiB in all); send it again in a moment",
        "unavailable",
        503,
        b"retry-after: 1\r\n",
    )
