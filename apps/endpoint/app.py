"""The endpoint's HTTP shell: an OpenAI-compatible reverse proxy to one workload's model server.

Decisions:

* Where the model server is, and which task it serves, is asked of ``upstream()`` on every
  request (the caller caches it), so a model server restarted on a new port is found without
  restarting the endpoint. ``None`` means the model is not running: 503.
* The workload's task decides which routes are proxied (``nodeau.domain.tasks.routes_for``);
  a route of another task is a 404 naming the task and the routes it answers. ``/v1/models``,
  ``/v1/models/{id}`` and ``/health`` are answered here.
* Only the route's own path is sent upstream (with the client's query string), so no crafted
  path reaches another upstream URL. Hop-by-hop headers, ``Host``, ``Content-Length`` and
  ``Expect`` are not forwarded; nothing is added (every client is on 127.0.0.1, so
  ``X-Forwarded-For`` would say nothing). The upstream request is built without the client's
  default headers, so an upstream never compresses for a client that did not ask for it.
* A request body is read whole, up to ``max_body_bytes`` (32 MiB), before it is forwarded. A
  larger one is a 413 sent after draining what the client is still sending (bounded in bytes
  and seconds), so the client reads the answer instead of a connection reset.
* A response is relayed chunk by chunk as it arrives (``aiter_raw``: the upstream's bytes,
  its Content-Encoding and Content-Length kept), never buffered, so a streamed chat
  completion reaches the client event by event. Its upstream response is closed whatever
  happens. A client that hangs up while the upstream is still working (before its answer's
  headers, or during a stream without Content-Length) has its upstream request cancelled
  and that connection closed, so the model stops generating for nobody. An upstream that
  breaks off mid-response leaves the client's response incomplete (its connection is
  closed) rather than ending it as if whole.
* No read timeout upstream: a non-streamed generation may take minutes to its first byte.
  Connecting (5 s), writing (60 s) and waiting for a pooled connection (60 s) are bounded.
* Every failure is an OpenAI-style JSON error (``{"error": {"message", "type"}}``): 404, 413,
  502 (upstream unreachable), 503 (not running), 500 (anything unexpected; the server logs the
  traceback and keeps serving).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from functools import partial
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, TypeVar

import anyio
import httpx
from attrs import frozen
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from nodeau.apps.endpoint.connections import KeepAliveTransport
from nodeau.domain.tasks import Task, routes_for

MAX_BODY_BYTES = 32 * 1024 * 1024
DRAIN_BYTES = 256 * 1024 * 1024  # past this, a too-large body is not read any further
DRAIN_S = 10.0
CONNECT_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 60.0
POOL_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 512
MAX_KEEPALIVE = 64
KEEPALIVE_EXPIRY_S = 4.0  # under uvicorn's 5 s and llama-server's own keep-alive time-out

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_HOP_BY_HOP = frozenset(h.encode() for h in HOP_BY_HOP)
_NOT_FORWARDED = _HOP_BY_HOP | {b"host", b"content-length", b"expect"}
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
PROXIED_PATHS = tuple(dict.fromkeys(path for task in Task for path in routes_for(task)))

log = logging.getLogger("nodeau.endpoint")
T = TypeVar("T")


@frozen(kw_only=True)
class Upstream:
    """The model server behind the endpoint now: where it is, its task and model id."""

    base_url: str
    task: Task
    model_name: str
    started_at: datetime | None = None  # the model's "created" in /v1/models when known


def error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Response:
    """An OpenAI-style error: ``{"error": {"message": ..., "type": ...}}``."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}},
        status_code=status,
        headers=headers,
    )


def one_line(exc: BaseException) -> str:
    """An exception as one line: its text, or its class name when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__


def not_running() -> Response:
    return error(
        503,
        "the model of this endpoint is not running (stopped, or still starting); "
        "this endpoint answers again once it runs",
        "unavailable",
    )


def wrong_task(path: str, upstream: Upstream) -> Response:
    routes = ", ".join(routes_for(upstream.task))
    return error(
        404,
        f"{path} is not served here: {upstream.model_name} runs the {upstream.task.value} task, "
        f"which answers {routes} (and /v1/models)",
        "not_found",
    )


def too_large(limit: int) -> Response:
    return error(
        413,
        f"the request body is larger than this endpoint accepts ({limit // (1024 * 1024)} MiB)",
        "request_too_large",
        headers={"connection": "close"},
    )


def unreachable(upstream: Upstream, exc: httpx.HTTPError) -> Response:
    if isinstance(exc, httpx.PoolTimeout):
        return error(
            503,
            f"too many requests in flight to the model server at {upstream.base_url}; "
            f"none finished within {POOL_TIMEOUT_S:g} s",
            "unavailable",
        )
    if isinstance(exc, httpx.ConnectError):
        why = "nothing answers there (it may be restarting)"
    elif isinstance(exc, httpx.ConnectTimeout):
        why = f"it did not accept a connection within {CONNECT_TIMEOUT_S:g} s"
    elif isinstance(exc, httpx.RemoteProtocolError):
        why = f"it closed the connection without a valid answer ({one_line(exc)})"
    else:
        why = f"{type(exc).__name__}: {one_line(exc)}"
    return error(502, f"cannot reach the model server at {upstream.base_url}: {why}", "bad_gateway")


def model_object(upstream: Upstream) -> dict[str, object]:
    """The workload's model as an OpenAI model object."""
    created = int(upstream.started_at.timestamp()) if upstream.started_at is not None else 0
    return {
        "id": upstream.model_name,
        "object": "model",
        "created": created,
        "owned_by": "nodeau",
    }


def forwarded_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request headers sent upstream: all but hop-by-hop ones (and those the client's
    ``Connection`` names), ``Host``, ``Content-Length`` and ``Expect``."""
    dropped = _NOT_FORWARDED | _connection_named(raw)
    return [(k, v) for k, v in raw if k.lower() not in dropped]


def relayed_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The upstream response headers sent back: all but hop-by-hop ones."""
    dropped = _HOP_BY_HOP | _connection_named(raw)
    return [(k.lower(), v) for k, v in raw if k.lower() not in dropped]


def _connection_named(raw: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    named = (
        part.strip().lower() for k, v in raw if k.lower() == b"connection" for part in v.split(b",")
    )
    return frozenset(n for n in named if n)


class _Relay(Response):
    """The upstream response, passed on chunk by chunk as it arrives; always closed after."""

    def __init__(self, upstream: httpx.Response, base_url: str) -> None:
        self.status_code = upstream.status_code
        self.background = None
        self.raw_headers = relayed_headers(upstream.headers.raw)
        self._upstream = upstream
        self._base_url = base_url
        # A response with a length was generated whole before its headers were sent: nothing
        # to stop if the client leaves. Without one (a stream), watch for the client leaving.
        self._streamed = "content-length" not in upstream.headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if self._streamed:
                await unless_client_leaves(self._relay(send), receive)
            else:
                await self._relay(send)
        finally:
            await self._upstream.aclose()

    async def _relay(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        try:
            async for chunk in self._upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError as exc:
            # Left incomplete on purpose: the server closes the connection, the client sees
            # a truncated response instead of a clean end.
            log.warning(
                "the model server at %s broke off a response (%s); the client's connection "
                "is closed",
                self._base_url,
                one_line(exc),
            )
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _client_gone(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


async def unless_client_leaves(
    work: Coroutine[Any, Any, T],
    receive: Receive,
    discard: Callable[[T], Awaitable[None]] | None = None,
) -> T | None:
    """What ``work`` returns (or raises), or None when the client hangs up first; ``work``
    is then cancelled and awaited, so it closes what it opened (an upstream request whose
    connection closes stops its generation).

    Plain asyncio tasks rather than an anyio task group: the endpoint runs on asyncio only,
    and a task group cost about 0.3 ms of CPU per request here (bench/proxy.py)."""
    loop = asyncio.get_running_loop()
    working = loop.create_task(work)
    gone = loop.create_task(_client_gone(receive))
    try:
        await asyncio.wait((working, gone), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled from outside (shutting down): nothing is returned
        working.cancel()
        await _settled(working, discard)
        raise
    finally:
        gone.cancel()
        if gone.done() and not gone.cancelled():
            gone.exception()  # retrieved: a receive that failed means the client is gone too
    if not working.done():
        working.cancel()
        await asyncio.wait((working,))
    return None if working.cancelled() else working.result()


async def _settled(task: asyncio.Task[T], discard: Callable[[T], Awaitable[None]] | None) -> None:
    """Wait for a cancelled task to end; discard what it produced if it had finished."""
    with suppress(BaseException):
        await asyncio.wait((task,))
    if task.done() and not task.cancelled() and task.exception() is None and discard:
        await discard(task.result())


async def read_body(request: Request, limit: int) -> bytes | None:
    """The whole request body, or None when it is larger than ``limit`` (what the client
    still sends is then drained, at most DRAIN_BYTES for DRAIN_S)."""
    declared = request.headers.get("content-length", "")
    stream = request.stream()
    try:
        if declared.isdigit() and int(declared) > limit:
            await _drain(stream)
            return None
        parts: list[bytes] = []
        size = 0
        async for chunk in stream:
            size += len(chunk)
            if size > limit:
                await _drain(stream)
                return None
            parts.append(chunk)
        return b"".join(parts)
    finally:
        await stream.aclose()


async def _drain(stream: AsyncIterator[bytes]) -> None:
    drained = 0
    with anyio.move_on_after(DRAIN_S):
        async for chunk in stream:
            drained += len(chunk)
            if drained > DRAIN_BYTES:
                return


async def _close(response: httpx.Response) -> None:
    await response.aclose()


def new_client() -> httpx.AsyncClient:
    """The client the endpoint reaches model servers with: no read timeout (generations are
    long), bounded connect/write/pool waits, no proxies from the environment, no cookie jar."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(
            connect=CONNECT_TIMEOUT_S, read=None, write=WRITE_TIMEOUT_S, pool=POOL_TIMEOUT_S
        ),
        transport=KeepAliveTransport(
            max_connections=MAX_CONNECTIONS,
            max_idle=MAX_KEEPALIVE,
            keepalive_expiry_s=KEEPALIVE_EXPIRY_S,
        ),
        trust_env=False,
        follow_redirects=False,
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
    )


class _Endpoint:
    """The request handlers, sharing the upstream lookup and the client."""

    def __init__(
        self,
        upstream: Callable[[], Upstream | None],
        client: httpx.AsyncClient | None,
        max_body_bytes: int,
    ) -> None:
        self._upstream = upstream
        self.client = client
        self._max_body_bytes = max_body_bytes

    def lookup(self) -> Upstream | Response:
        """The upstream now, or the error response that says why there is none."""
        try:
            found = self._upstream()
        except Exception as exc:
            log.warning("cannot look up the model server: %s", one_line(exc))
            return error(
                503, f"cannot find this endpoint's model server: {one_line(exc)}", "unavailable"
            )
        return not_running() if found is None else found

    async def health(self, request: Request) -> Response:
        found = self.lookup()
        running = isinstance(found, Upstream)
        return JSONResponse(
            {
                "status": "ok",
                "model": found.model_name if isinstance(found, Upstream) else None,
                "task": found.task.value if isinstance(found, Upstream) else None,
                "model_server": "running" if running else "not running",
            }
        )

    async def models(self, request: Request) -> Response:
        found = self.lookup()
        if not isinstance(found, Upstream):
            return found
        return JSONResponse({"object": "list", "data": [model_object(found)]})

    async def model(self, request: Request) -> Response:
        found = self.lookup()
        if not isinstance(found, Upstream):
            return found
        asked = request.path_params["model"]
        if asked != found.model_name:
            return error(
                404,
                f"no model {asked!r} here; this endpoint serves {found.model_name!r}",
                "not_found",
            )
        return JSONResponse(model_object(found))

    async def proxy(self, path: str, request: Request) -> Response:
        found = self.lookup()
        if not isinstance(found, Upstream):
            return found
        if path not in routes_for(found.task):
            return wrong_task(path, found)
        try:
            body = await read_body(request, self._max_body_bytes)
        except ClientDisconnect:
            return error(400, "the client left before sending its whole body", "invalid_request")
        if body is None:
            return too_large(self._max_body_bytes)
        query = request.scope.get("query_string", b"")
        url = found.base_url.rstrip("/") + path + ("?" + query.decode("latin-1") if query else "")
        assert self.client is not None, "the lifespan creates the client"
        outgoing = httpx.Request(
            request.method, url, headers=forwarded_headers(request.headers.raw), content=body
        )
        try:
            response = await unless_client_leaves(
                self.client.send(outgoing, stream=True), request.receive, _close
            )
        except httpx.HTTPError as exc:
            return unreachable(found, exc)
        if response is None:  # nobody is left to answer
            return Response(status_code=499)
        return _Relay(response, found.base_url)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error(
            404,
            f"no route {request.url.path}: this endpoint answers /v1/models, /health and the "
            f"routes of its workload's task ({', '.join(PROXIED_PATHS)})",
            "not_found",
        )
    return error(exc.status_code, exc.detail, "invalid_request")


async def _unexpected(request: Request, exc: Exception) -> Response:
    return error(
        500,
        f"the endpoint failed on this request ({type(exc).__name__}: {one_line(exc)}); "
        "it keeps serving",
        "internal_error",
    )


def create_app(
    upstream: Callable[[], Upstream | None],
    *,
    client: httpx.AsyncClient | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """The endpoint app. ``upstream()`` says where the model server is now (None: not
    running). ``client`` reaches it; when None, the app's lifespan makes one and closes it."""
    endpoint = _Endpoint(upstream, client, max_body_bytes)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if client is not None:
            yield
            return
        async with new_client() as made:
            endpoint.client = made
            yield

    routes = [
        Route("/health", endpoint.health, methods=["GET"]),
        Route("/v1/models", endpoint.models, methods=["GET"]),
        Route("/v1/models/{model:path}", endpoint.model, methods=["GET"]),
        *(Route(path, partial(endpoint.proxy, path), methods=_METHODS) for path in PROXIED_PATHS),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
