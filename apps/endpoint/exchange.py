"""One proxied request: its body read, sent to the model server, the answer relayed.

Decisions:

* A proxied route is a plain ASGI app inside the Starlette router: the request is read from
  and the answer written to ASGI messages, with no request or response objects in between
  (they cost more CPU than the proxying itself; bench/proxy.py). It is sent through the
  endpoint's httpx transport directly: ``httpx.AsyncClient.send`` adds authentication,
  redirect and cookie handling, none of which a reverse proxy wants.
* Only the route's own path is sent upstream (with the client's query string), so no crafted
  path reaches another upstream URL. Hop-by-hop headers (and those the client's
  ``Connection`` names), ``Host``, ``Origin``, ``Content-Length`` and ``Expect`` are not
  forwarded (the model server has no use for the caller's web origin: ``callers`` decided);
  nothing is added but what httpx adds to any request with a body (``Host``,
  ``Content-Length``): no client default headers, so an upstream never compresses for a
  client that did not ask for it, and no ``X-Forwarded-For`` (every client is on 127.0.0.1).
* A request body is read whole, up to a limit, before it is forwarded. A larger one is
  drained (at most ``DRAIN_BYTES``, for at most ``DRAIN_S``) before the 413, so the client
  reads the answer instead of a connection reset.
* The client's leaving is watched by one task for the whole exchange; when it leaves, the
  exchange is cancelled wherever it waits (for a connection, for the answer's head, for the
  next chunk of a stream), and the upstream request, closed unfinished, stops its
  generation. An answer with a Content-Length was generated whole before its headers were
  sent: nothing is left to stop, so the watch ends there.
* An answer is relayed chunk by chunk as it arrives (the upstream's bytes, its
  Content-Encoding and Content-Length kept), never buffered, and its upstream response is
  closed whatever happens. Its hop-by-hop headers are dropped, and so is any CORS header
  (``Access-Control-*``): llama-server sends ``Access-Control-Allow-Origin: *`` by default,
  and the endpoint grants no web page access. An upstream that breaks off mid-answer
  leaves the client's response incomplete (uvicorn closes its connection) rather than
  ending it as if whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import lru_cache

import httpx
from starlette.types import Receive, Scope, Send

from nodeau.apps.endpoint.answers import one_line, unreachable

DRAIN_BYTES = 256 * 1024 * 1024  # past this, a too-large body is not read any further
DRAIN_S = 10.0

_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
_NOT_FORWARDED = _HOP_BY_HOP | {b"host", b"origin", b"content-length", b"expect"}
_CORS = b"access-control-"

log = logging.getLogger("nodeau.endpoint")

Headers = list[tuple[bytes, bytes]]


class ClientLeft(Exception):
    """The client hung up before its request's body was whole."""


def forwarded_headers(raw: Headers) -> tuple[Headers, int | None]:
    """The request headers sent upstream (ASGI's, names in lower case), and the body's
    declared length (None when not declared as a number)."""
    kept: Headers = []
    named: frozenset[bytes] = frozenset()
    declared: int | None = None
    for name, value in raw:
        if name not in _NOT_FORWARDED:
            kept.append((name, value))
        elif name == b"connection":
            named |= _listed(value)
        elif name == b"content-length" and value.isdigit():
            declared = int(value)
    if named:
        kept = [(name, value) for name, value in kept if name not in named]
    return kept, declared


def relayed_headers(raw: Headers) -> tuple[Headers, bool]:
    """The upstream response headers sent back (names in lower case, all but hop-by-hop ones,
    those its ``Connection`` names and CORS ones), and whether they declare a Content-Length."""
    lowered = [(name.lower(), value) for name, value in raw]
    named = frozenset().union(*(_listed(v) for n, v in lowered if n == b"connection"))
    dropped = _HOP_BY_HOP | named if named else _HOP_BY_HOP
    kept = [
        (name, value)
        for name, value in lowered
        if name not in dropped and not name.startswith(_CORS)
    ]
    return kept, any(name == b"content-length" for name, _ in kept)


def _listed(value: bytes) -> frozenset[bytes]:
    return frozenset(p for part in value.split(b",") if (p := part.strip().lower()))


@lru_cache(maxsize=64)
def _route_url(base_url: str, path: str) -> httpx.URL:
    return httpx.URL(base_url.rstrip("/") + path)


def upstream_url(base_url: str, path: str, query: bytes) -> httpx.URL:
    """The URL a route's request goes to upstream: the route's path and the client's query
    (parsed once per model server and route when there is no query)."""
    if not query:
        return _route_url(base_url, path)
    return httpx.URL(base_url.rstrip("/") + path + "?" + query.decode("latin-1"))


async def read_body(receive: Receive, declared: int | None, limit: int) -> bytes | None:
    """The whole request body, or None when it is larger than ``limit`` (what the client
    still sends is then drained, at most DRAIN_BYTES for DRAIN_S). Raises ``ClientLeft``."""
    if declared is not None and declared > limit:
        await _drain(receive)
        return None
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientLeft
        chunk: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        size += len(chunk)
        if size > limit:
            if more:
                await _drain(receive)
            return None
        if not more:
            return b"".join((*parts, chunk)) if parts else chunk
        parts.append(chunk)


async def _drain(receive: Receive) -> None:
    drained = 0
    try:
        async with asyncio.timeout(DRAIN_S):
            while drained <= DRAIN_BYTES:
                message = await receive()
                if message["type"] != "http.request":
                    return
                drained += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return
    except TimeoutError:
        return


async def _client_gone(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def exchange(
    transport: httpx.AsyncBaseTransport,
    request: httpx.Request,
    base_url: str,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """Send ``request`` upstream and relay its answer to ``send``; a client that leaves
    (``receive`` says so) cancels it wherever it waits. A model server not reached is a
    502 (``answers.unreachable``)."""
    me = asyncio.current_task()
    assert me is not None, "an ASGI app runs in a task"
    gone = asyncio.get_running_loop().create_task(_client_gone(receive))
    left = False

    def on_gone(task: asyncio.Task[None]) -> None:
        nonlocal left
        if not task.cancelled():
            task.exception()  # retrieved: a receive that failed means the client is gone too
            left = True
            me.cancel()

    def unwatch() -> None:
        gone.remove_done_callback(on_gone)

    gone.add_done_callback(on_gone)
    try:
        try:
            response = await transport.handle_async_request(request)
        except httpx.HTTPError as exc:
            unwatch()
            await unreachable(base_url, exc)(scope, receive, send)
            return
        try:
            await _relay(response, base_url, unwatch, send)
        finally:
            await response.aclose()
    except asyncio.CancelledError:
        if not left or me.uncancel() > 0:
            raise  # cancelled from outside (shutting down), not (only) by the client leaving
    finally:
        unwatch()
        gone.cancel()


async def _relay(
    response: httpx.Response, base_url: str, unwatch: Callable[[], None], send: Send
) -> None:
    headers, has_length = relayed_headers(response.headers.raw)
    if has_length:  # generated whole: nothing to stop if the client leaves now
        unwatch()
    body = response.stream
    assert isinstance(body, httpx.AsyncByteStream), "an async transport's response"
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    try:
        async for chunk in body:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except httpx.HTTPError as exc:
        # Left incomplete on purpose: the server closes the connection, the client sees a
        # truncated response instead of a clean end.
        log.warning(
            "the model server at %s broke off a response (%s); the client's connection is closed",
            base_url,
            one_line(exc),
        )
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})
