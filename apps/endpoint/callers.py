"""Who the endpoint answers: the Host and Origin rules, against DNS rebinding and against
cross-site requests from web pages (the hole of Ollama's CVE-2024-28224).

Binding 127.0.0.1 keeps other machines out, but not a web page in a browser on this
machine: a page can send requests to 127.0.0.1 (a ``text/plain`` POST needs no CORS
preflight), or rebind its own host name to 127.0.0.1 and then read the answers as its own.
So every request passes these rules first, before its body is read or anything is looked up:

* Its ``Host`` must name this endpoint: ``127.0.0.1:PORT``, ``localhost:PORT`` or
  ``[::1]:PORT`` (names case-insensitive), PORT being the one the connection arrived on.
  Any other host (a rebound name, a LAN address, a trailing dot) is refused: 403.
* A ``Host`` without a port names port 80 (RFC 9110, 7.2), so it is accepted only on an
  endpoint on port 80. Browsers, curl, httpx and the ``openai`` client always send the port
  when it is not 80; a bare ``localhost`` comes from nothing that names this endpoint.
* A missing ``Host`` is accepted from HTTP/1.0 only: a browser always sends one, so no page
  can send a request without it, and a program on this machine that omits it could reach
  the endpoint anyway. HTTP/1.1 without a ``Host``, or any request with more than one, is a
  400 (RFC 9112, 3.2 requires both).
* An ``Origin`` (sent by browsers, and by apps built on them, on every cross-origin request
  and every POST) must be a loopback page, ``http://127.0.0.1``, ``http://localhost`` or
  ``http://[::1]`` on any port, or one the endpoint was started to allow
  (``--allow-origin ORIGIN``, repeatable); otherwise 403, whatever the method or route. A
  request without ``Origin`` is a program's (the ``openai`` client, curl), not a page's.
  ``null`` (sandboxed frames, ``file:`` pages) and ``*`` cannot be allowed.
* A page of an allowed origin (loopback, or ``--allow-origin``) may read the answers: each
  answer to a request with such an ``Origin`` carries ``Access-Control-Allow-Origin``
  echoing it (never ``*``, never ``Access-Control-Allow-Credentials``: the endpoint has no
  cookies or sessions to lend), with ``Vary: Origin``; a CORS preflight (``OPTIONS`` with
  ``Access-Control-Request-Method``) from one is a 204 allowing GET and POST and the
  headers it asks for (header names only; the OpenAI SDKs send ``x-stainless-*``). Any
  other origin is still a 403, its preflight too, with no CORS header. Whatever CORS
  headers the model server adds are dropped (``exchange``; llama-server adds ``*``).
* 403 rather than 421 (Misdirected Request): both rules refuse the same way, and neither
  the ``openai`` client nor a browser retries a 403; 421 asks a client to try again on
  another connection, which is no answer to a rebound host name.

The rules are a scan of the request's headers (a few comparisons of bytes), nothing more.
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
