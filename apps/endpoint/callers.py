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
* No CORS header is ever sent, to an allowed origin either (``exchange`` drops any the
  model server adds; llama-server adds ``Access-Control-Allow-Origin: *``), and an OPTIONS
  preflight is not answered with one (405, or 403 first). So an allowed origin suits a
  client that sends an ``Origin`` but does not enforce CORS (a browser extension, a desktop
  app on a web engine); a page in a browser cannot read the answers.
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
from starlette.types import ASGIApp, Receive, Scope, Send

from nodeau.apps.endpoint.answers import host_missing, host_refused, origin_refused, two_hosts
from nodeau.domain.origins import parse_origin

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_LOOPBACK_ORIGIN = re.compile(rb"http://(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?")


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
