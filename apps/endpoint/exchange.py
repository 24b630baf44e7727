"""One proxied request: its body read, sent to the model server, the answer relayed.

Why it is so: docs/adr/decisions/apps-endpoint.md (exchange.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Protocol

from starlette.types import Receive, Scope, Send

from nodeau.apps.endpoint.answers import one_line, unreachable
from nodeau.apps.endpoint.connections import Target, upstream_target
from nodeau.apps.endpoint.model_server import Answer, Headers, UpstreamError
from nodeau.apps.endpoint.request_head import CLIENT_GONE

DRAIN_BYTES = 256 * 1024 * 1024  # past this, a too-large body is not read any further
DRAIN_S = 10.0
WHOLE_BYTES = 64 * 1024  # an answer with a Content-Length is relayed whole up to this

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
# the caller's own credentials stay here: upstream, only the model server's key is sent
_NOT_FORWARDED = _HOP_BY_HOP | {
    b"host",
    b"origin",
    b"content-length",
    b"expect",
    b"authorization",
    b"x-api-key",
}
_CORS = b"access-control-"

log = logging.getLogger("nodeau.endpoint")


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


class UpstreamConnections(Protocol):
    """How requests reach model servers (``connections.ModelServerConnections``)."""

    async def send(self, target: Target, method: bytes, headers: Headers, body: bytes) -> Answer:
        """The answer to one request, its head whole; raises ``UpstreamError``."""
        ...

    async def aclose(self) -> None:
        """Close every idle connection (the app's lifespan ends)."""
        ...


async def exchange(
    connections: UpstreamConnections,
    base_url: str,
    path: str,
    headers: Headers,
    body: bytes,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    api_key: str | None = None,
) -> None:
    """Send the request to ``path`` on the model server at ``base_url`` (with its
    ``api_key``, when it has one) and relay its answer
    to ``send``; a client that leaves (``CLIENT_GONE``, or ``receive``, says so) cancels it
    wherever it waits. A model server not reached, or not answering in HTTP, is a 502
    (``answers.unreachable``)."""
    me = asyncio.current_task()
    assert me is not None, "an ASGI app runs in a task"
    told: asyncio.Future[None] | None = (
        (scope.get("extensions") or {}).get(CLIENT_GONE, {}).get("future")
    )
    gone = told if told is not None else asyncio.ensure_future(_client_gone(receive))
    left = False

    def on_gone(done: asyncio.Future[None]) -> None:
        nonlocal left
        if not done.cancelled():
            done.exception()  # retrieved: a receive that failed means the client is gone too
            left = True
            me.cancel()

    def unwatch() -> None:
        gone.remove_done_callback(on_gone)

    gone.add_done_callback(on_gone)
    try:
        try:
            target = upstream_target(base_url, path, scope["query_string"])
            if api_key is not None:
                headers = [*headers, (b"authorization", b"Bearer " + api_key.encode())]
            answer = await connections.send(target, scope["method"].encode(), headers, body)
        except UpstreamError as exc:
            unwatch()
            await unreachable(base_url, exc)(scope, receive, send)
            return
        try:
            await _relay(answer, base_url, unwatch, send)
        finally:
            answer.close()
    except asyncio.CancelledError:
        if not left or me.uncancel() > 0:
            raise  # cancelled from outside (shutting down), not (only) by the client leaving
    finally:
        unwatch()
        if told is None:
            gone.cancel()


async def _relay(answer: Answer, base_url: str, unwatch: Callable[[], None], send: Send) -> None:
    headers, has_length = relayed_headers(answer.headers)
    if has_length:  # generated whole: nothing to stop if the client leaves now
        unwatch()
        with suppress(UpstreamError):  # raised again below, once what arrived is relayed
            await answer.arrival(WHOLE_BYTES)
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    try:
        while True:
            part = answer.take()
            if answer.complete:  # every part has been taken: this one is the last
                break
            if part:
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await answer.arrival()
    except UpstreamError as exc:
        # Left incomplete on purpose: the server closes the connection, the client sees a
        # truncated response instead of a clean end.
        log.warning(
            "the model server at %s broke off a response (%s); the client's connection is closed",
            base_url,
            one_line(exc),
        )
        return
    await send({"type": "http.response.body", "body": part, "more_body": False})
