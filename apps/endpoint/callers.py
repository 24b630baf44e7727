"""Who the endpoint answers: the Host and Origin rules, against DNS rebinding and against
cross-site requests from web pages (the hole of Ollama's CVE-2024-28224).

Why it is so: docs/adr/decisions/apps-endpoint.md (callers.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodeau.apps.endpoint.answers import host_missing, host_refused, origin_refused, two_hosts
from nodeau.domain.origins import parse_origin

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_LOOPBACK_ORIGIN = re.compile(rb"http://(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?")
_HEADER_NAMES = re.compile(
    rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*"
)
MAX_ASKED_HEADERS = 4096  # bytes of Access-Control-Request-Headers a preflight may name
PREFLIGHT_MAX_AGE_S = 600
EXPOSED = b"Retry-After"  # what an answer carries that a page's script may read besides


@lru_cache(maxsize=16)
def _hosts(port: int) -> frozenset[bytes]:
    """The ``Host`` values (in lower case) that name the endpoint on ``port``."""
    named = {f"{name}:{port}".encode() for name in LOOPBACK_NAMES}
    if port == 80:
        named |= {name.encode() for name in LOOPBACK_NAMES}
    return frozenset(named)


class CallerRules:
    """ASGI middleware: an HTTP request whose ``Host`` does not name this endpoint, or whose
    ``Origin`` is neither loopback nor allowed, is answered here (403 or 400) and goes no
    further; anything else goes on to ``app`` untouched."""

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(parse_origin(o).encode() for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            origin = origin_of(scope)
            if origin is not None:
                if scope["method"] == "OPTIONS" and _header(
                    scope, b"access-control-request-method"
                ):
                    await preflight(origin, scope)(scope, receive, send)
                    return
                send = with_cors(send, origin)
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer to a request these rules refuse (the Host rule first), or None."""
        server = scope.get("server")
        port = server[1] if server is not None else None
        host: bytes | None = None
        hosts = 0
        refused_origin: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
                hosts += 1
            elif name == b"origin" and refused_origin is None and not self.allows(value):
                refused_origin = value
        if hosts > 1:
            return two_hosts()
        if host is None:
            if scope["http_version"] != "1.0":
                return host_missing(port)
        elif port is None or host.lower() not in _hosts(port):
            return host_refused(host.decode("latin-1"), port)
        if refused_origin is not None:
            return origin_refused(refused_origin.decode("latin-1"))
        return None

    def allows(self, origin: bytes) -> bool:
        """Whether a request from ``origin`` (an ``Origin`` header's value) is served."""
        lowered = origin.lower()
        return _LOOPBACK_ORIGIN.fullmatch(lowered) is not None or lowered in self.allowed


def origin_of(scope: Scope) -> bytes | None:
    """The request's ``Origin`` (the first, as sent), or None for a program's request."""
    return _header(scope, b"origin")


def is_preflight(scope: Scope) -> bool:
    """Whether the request is a CORS preflight (``OPTIONS`` asking for a method)."""
    return (
        scope["method"] == "OPTIONS"
        and _header(scope, b"access-control-request-method") is not None
    )


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key == name), None)


def cors_headers(origin: bytes) -> list[tuple[bytes, bytes]]:
    """What an answer to a request from the allowed ``origin`` carries so its page may
    read it."""
    return [
        (b"access-control-allow-origin", origin),
        (b"access-control-expose-headers", EXPOSED),
        (b"vary", b"Origin"),
    ]


def with_cors(send: Send, origin: bytes) -> Send:
    """``send``, adding ``cors_headers(origin)`` to the answer's head."""
    added = cors_headers(origin)

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *added]}
        await send(message)

    return sending


def preflight(origin: bytes, scope: Scope) -> Response:
    """The 204 answering a CORS preflight from the allowed ``origin``: GET and POST, and the
    request headers it names when they are header names (none otherwise)."""
    headers = {
        "Access-Control-Allow-Origin": origin.decode("latin-1"),
        "Access-Control-Allow-Methods": "GET, POST",
        "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
        "Vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
    }
    asked = (_header(scope, b"access-control-request-headers") or b"").strip()
    if asked and len(asked) <= MAX_ASKED_HEADERS and _HEADER_NAMES.fullmatch(asked):
        headers["Access-Control-Allow-Headers"] = asked.decode("latin-1")
    if _header(scope, b"access-control-request-private-network") == b"true":
        headers["Access-Control-Allow-Private-Network"] = "true"  # a public page, allowed
    return Response(status_code=204, headers=headers)
