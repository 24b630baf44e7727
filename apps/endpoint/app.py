"""The endpoint's HTTP shell: an OpenAI-compatible reverse proxy to one workload's model server.

Why it is so: docs/adr/decisions/apps-endpoint.md (app.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodeau.apps.endpoint.answers import (
    CONNECT_TIMEOUT_S,
    POOL_TIMEOUT_S,
    WRITE_TIMEOUT_S,
    Unavailable,
    Upstream,
    client_left,
    error,
    model_object,
    one_line,
    too_large,
    wrong_task,
)
from nodeau.apps.endpoint.bodies import request_object
from nodeau.apps.endpoint.callers import CallerRules, origin_of, with_cors
from nodeau.apps.endpoint.choice import Lookup, OneModel
from nodeau.apps.endpoint.connections import ModelServerConnections
from nodeau.apps.endpoint.exchange import (
    ClientLeft,
    UpstreamConnections,
    exchange,
    forwarded_headers,
    read_body,
)
from nodeau.apps.endpoint.metrics import WORKLOAD, Metrics
from nodeau.domain.origins import parse_origin
from nodeau.domain.tasks import Task, routes_for

__all__ = [
    "MAX_BODY_BYTES",
    "PROXIED_PATHS",
    "Lookup",
    "Unavailable",
    "Upstream",
    "UpstreamConnections",
    "create_app",
    "new_connections",
]

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_CONNECTIONS = 512
MAX_KEEPALIVE = 64
KEEPALIVE_EXPIRY_S = 4.0  # under uvicorn's 5 s and llama-server's own keep-alive time-out

_METHODS = ("POST",)  # every proxied route; OPTIONS too is a 405 answered here
PROXIED_PATHS = tuple(dict.fromkeys(path for task in Task for path in routes_for(task)))
_ANSWERED = {task: frozenset(routes_for(task)) for task in Task}

log = logging.getLogger("nodeau.endpoint")


def new_connections() -> ModelServerConnections:
    """How the endpoint reaches model servers: kept-alive HTTP/1.1 connections, at most
    ``MAX_CONNECTIONS`` requests in flight."""
    return ModelServerConnections(
        max_connections=MAX_CONNECTIONS,
        max_idle=MAX_KEEPALIVE,
        keepalive_expiry_s=KEEPALIVE_EXPIRY_S,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        write_timeout_s=WRITE_TIMEOUT_S,
        pool_timeout_s=POOL_TIMEOUT_S,
    )


class Choice(Protocol):
    """Which model server a request goes to (``choice``: one workload's, or the gateway's
    pick by the request's ``model``)."""

    def early(self) -> Upstream | Response | None:
        """Before the body is read: the upstream, an answer instead, or None (the body's
        ``model`` decides)."""
        ...

    def chosen(self, early: Upstream | None, model: object) -> Upstream | Response:
        """The upstream the body's ``model`` (None when absent) goes to, or the answer."""
        ...

    def listed(self) -> list[Upstream] | Response: ...

    def named(self, model: str) -> Upstream | Response: ...

    def health(self) -> dict[str, object]: ...


class _Endpoint:
    """The request handlers, sharing the choice of upstream and the connections."""

    def __init__(
        self,
        choice: Choice,
        connections: UpstreamConnections | None,
        max_body_bytes: int,
    ) -> None:
        self.choice = choice
        self.connections = connections
        self.max_body_bytes = max_body_bytes
        self.metrics = Metrics()

    async def exposition(self, request: Request) -> Response:
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def health(self, request: Request) -> Response:
        return JSONResponse(self.choice.health())

    async def models(self, request: Request) -> Response:
        found = self.choice.listed()
        if isinstance(found, Response):
            return found
        return JSONResponse({"object": "list", "data": [model_object(u) for u in found]})

    async def model(self, request: Request) -> Response:
        found = self.choice.named(request.path_params["model"])
        if not isinstance(found, Upstream):
            return found
        return JSONResponse(model_object(found))


class ProxiedRoute:
    """One proxied route (``path``), as an ASGI app: its upstream chosen, checked against
    the workload's task, its body read, then sent upstream and answered (``exchange``)."""

    def __init__(self, endpoint: _Endpoint, path: str) -> None:
        self._endpoint = endpoint
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._endpoint
        early = endpoint.choice.early()
        if isinstance(early, Response):
            await early(scope, receive, send)
            return
        if early is not None:
            scope[WORKLOAD] = early.model_name
            if self._path not in _ANSWERED[early.task]:
                await wrong_task(self._path, early)(scope, receive, send)
                return
        headers, declared = forwarded_headers(scope["headers"])
        try:
            body = await read_body(receive, declared, endpoint.max_body_bytes)
        except ClientLeft:
            await client_left()(scope, receive, send)
            return
        if body is None:
            await too_large(endpoint.max_body_bytes)(scope, receive, send)
            return
        asked = request_object(self._path, scope["headers"], body)
        if isinstance(asked, Response):
            await asked(scope, receive, send)
            return
        found = endpoint.choice.chosen(early, asked.get("model"))
        if isinstance(found, Response):
            await found(scope, receive, send)
            return
        if early is None:
            scope[WORKLOAD] = found.model_name
            if self._path not in _ANSWERED[found.task]:
                await wrong_task(self._path, found)(scope, receive, send)
                return
        assert endpoint.connections is not None, "the lifespan sets the connections"
        await exchange(
            endpoint.connections,
            found.base_url,
            self._path,
            headers,
            body,
            scope,
            receive,
            send,
            api_key=found.api_key,
        )


class _Front:
    """The endpoint as uvicorn calls it: a POST to a proxied path passes the caller rules and
    goes straight to its ``ProxiedRoute``; everything else goes to ``app`` (Starlette, with
    the same rules as middleware). An exception out of a proxied route is answered as
    Starlette's error middleware would (a JSON 500 when nothing was sent yet) and raised
    again, so uvicorn logs it and keeps serving."""

    def __init__(
        self,
        app: Starlette,
        rules: CallerRules,
        proxied: dict[str, ProxiedRoute],
        metrics: Metrics,
    ) -> None:
        self.app = app
        self._rules = rules
        self._proxied = proxied
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self._proxied.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        refusal = self._rules.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        origin = origin_of(scope)
        if origin is not None:  # a page's request, of an allowed origin: it may read the answer
            send = with_cors(send, origin)
        watch = self._metrics.watching(scope, send)
        send = watch
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await route(scope, receive, sending)
        except Exception as exc:
            if not started:
                await _failed(exc)(scope, receive, send)
            raise
        finally:
            watch.close()  # an answer broken off is counted too


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error(
            404,
            f"no route {request.url.path}: this endpoint answers /v1/models, /health, /metrics "
            f"and the routes of its workload's task ({', '.join(PROXIED_PATHS)})",
            "not_found",
        )
    if exc.status_code == 405 and exc.headers is not None:
        allowed = exc.headers["Allow"]
        return error(
            405,
            f"{request.method} is not answered on {request.url.path}; it takes {allowed}",
            "method_not_allowed",
            headers={"Allow": allowed},
        )
    return error(exc.status_code, exc.detail, "invalid_request")


async def _unexpected(request: Request, exc: Exception) -> Response:
    return _failed(exc)


def _failed(exc: Exception) -> Response:
    return error(
        500,
        f"the endpoint failed on this request ({type(exc).__name__}: {one_line(exc)}); "
        "it keeps serving",
        "internal_error",
    )


def create_app(
    upstream: Lookup,
    *,
    connections: UpstreamConnections | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
) -> ASGIApp:
    """The endpoint app. ``upstream()`` says where the model server is now (None: not
    running; ``Unavailable``: restarting). ``connections`` reach it (when None, the app's
    lifespan makes them: ``new_connections``); the lifespan closes them at its end.
    ``allowed_origins``: web origins served besides loopback pages
    (``domain.origins.parse_origin`` forms; ValueError for one that is not)."""
    return proxy_app(
        OneModel(upstream),
        connections=connections,
        max_body_bytes=max_body_bytes,
        allowed_origins=allowed_origins,
    )


def proxy_app(
    choice: Choice,
    *,
    connections: UpstreamConnections | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
) -> ASGIApp:
    """The proxy, its upstream for each request chosen by ``choice`` (an endpoint's one
    model, or the gateway's pick); the rest as ``create_app`` says."""
    endpoint = _Endpoint(choice, connections, max_body_bytes)
    origins = tuple(parse_origin(origin) for origin in allowed_origins)  # checked now

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        used = connections if connections is not None else new_connections()
        endpoint.connections = used
        try:
            yield
        finally:
            await used.aclose()

    proxied = {path: ProxiedRoute(endpoint, path) for path in PROXIED_PATHS}
    routes = [
        *(Route(path, route, methods=_METHODS) for path, route in proxied.items()),
        Route("/health", endpoint.health, methods=["GET"]),
        Route("/v1/models", endpoint.models, methods=["GET"]),
        Route("/v1/models/{model:path}", endpoint.model, methods=["GET"]),
        Route("/metrics", endpoint.exposition, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(CallerRules, allowed_origins=origins)],
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
    return _Front(app, CallerRules(app, allowed_origins=origins), proxied, endpoint.metrics)
