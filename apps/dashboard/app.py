"""The dashboard's HTTP shell: the page, its assets, its data, one action and the Playground.

Why it is so: docs/adr/decisions/apps-dashboard.md (app.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nodeau.apps.dashboard import playground
from nodeau.apps.dashboard.board import no_reading, read_views
from nodeau.apps.dashboard.board_cache import KeptBoard
from nodeau.apps.dashboard.board_encoding import EncodedBoard
from nodeau.apps.dashboard.guard import HEALTH_PATH, Guard
from nodeau.apps.dashboard.qualification import ModelQualification
from nodeau.apps.dashboard.session import Token, csrf_value
from nodeau.apps.planes.plane import Plane
from nodeau.apps.planes.status_rows import StatusRow
from nodeau.domain.hardware import MachineReading
from nodeau.ports.endpoints import EndpointAnswer, EndpointClient, MetricsTexts, NotAnswered
from nodeau.ports.errors import NodeauError

REFRESH_S = 2.0
MAX_AGE_S = 30.0  # a kept board older than this is read again before a poll is answered
STATIC = "static"
WITH_CLI = "cli"

T = TypeVar("T")


def static_folder() -> Path:
    return Path(str(files("nodeau.apps.dashboard").joinpath(STATIC)))


def error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}}, status_code=status
    )


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class Dashboard:
    """The handlers, sharing the plane (one caller at a time) and the HTTP client."""

    def __init__(
        self,
        plane: Plane,
        model_rows: Callable[[], Sequence[StatusRow]],
        token: Token,
        clock: Callable[[], datetime],
        client: EndpointClient,
        qualifications: Callable[[], Sequence[ModelQualification]],
        cards: Callable[[], MachineReading | None],
        metrics: MetricsTexts | None,
    ) -> None:
        self.plane = plane
        self.model_rows = model_rows
        self.qualifications = qualifications
        self.cards = cards
        self.metrics = metrics
        self.token = token
        self.clock = clock
        self.client = client
        self.description: str | None = None
        self._lock = threading.Lock()
        self.kept = KeptBoard(self.read_board, refresh_s=REFRESH_S, max_age_s=MAX_AGE_S)

    async def read_board(self) -> EncodedBoard:
        # the plane's reads hold the lock; encoding the document needs only the views
        views = await self.on_plane(
            lambda: read_views(
                self.plane,
                self.model_rows,
                self.clock(),
                self.qualifications,
                self.cards,
                self.metrics,
            )
        )
        return await run_in_threadpool(EncodedBoard, views)

    async def start(self) -> None:
        """What the server does as it starts: the plane's name, and the first read behind."""
        self.description = await self.on_plane(lambda: self.plane.description)
        self.kept.prefetch()

    async def on_plane(self, call: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return call()

        return await run_in_threadpool(locked)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def index(self, request: Request) -> Response:
        return FileResponse(static_folder() / "index.html", media_type="text/html")

    async def session(self, request: Request) -> Response:
        return JSONResponse(
            {
                "csrf": csrf_value(self.token.current()),
                "refresh_s": REFRESH_S,
                "plane": self.description,
            }
        )

    async def board(self, request: Request) -> Response:
        asked = request.query_params.getlist("with")
        if any(a != WITH_CLI for a in asked):
            return error(400, f"with= takes only {WITH_CLI} (the CLI's JSON of every view)",
                         "invalid_request")  # fmt: skip
        fresh = "no-cache" in request.headers.get("cache-control", "").lower()
        board = await self.kept.current(fresh=fresh)
        document = await run_in_threadpool(board.whole) if asked else board.page
        headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", "").lower():
            headers["Content-Encoding"] = "gzip"
            return Response(document.gzip, media_type="application/json", headers=headers)
        return Response(document.json, media_type="application/json", headers=headers)

    async def stop_batch(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            sentence = await self.on_plane(lambda: self.plane.batches.stop(name))
        except NodeauError as exc:
            return error(409, exc.one_line(), "conflict")
        finally:
            self.kept.forget()
        return JSONResponse({"name": name, "sentence": sentence})

    async def target(self, name: str) -> playground.Target | JSONResponse:
        try:
            return await self.on_plane(lambda: playground.find_target(self.plane, name))
        except playground.PlaygroundError as exc:
            return error(exc.status, exc.one_line(), "conflict")
        except NodeauError as exc:
            return error(409, exc.one_line(), "conflict")

    async def describe(self, request: Request) -> Response:
        found = await self.target(request.path_params["name"])
        if isinstance(found, JSONResponse):
            return found
        return JSONResponse({"task": found.task, "answered_by": playground.answered_by(found)})

    async def call(self, request: Request) -> Response:
        """One Playground request, to the workload's own endpoint."""
        found = await self.target(request.path_params["name"])
        if isinstance(found, JSONResponse):
            return found
        task = request.path_params["task"]
        if task != found.task:
            return error(400, f"{found.name} serves {found.task}, not {task}", "invalid_request")
        try:
            asked = json.loads(await request.body())
            body = playground.BODIES[task](found, asked)
        except ValueError:
            return error(400, "send a JSON object", "invalid_request")
        except playground.PlaygroundError as exc:
            return error(400, exc.one_line(), "invalid_request")
        said = {
            "answered_by": playground.answered_by(found),
            "request": body,
            "snippets": playground.snippets(found, body),
        }
        url = found.endpoint + playground.ROUTE_OF[task]
        try:
            upstream = await self.client.post(url, body)
        except NotAnswered as exc:
            return error(502, f"{url} did not answer: {exc.one_line()}", "bad_gateway")
        if upstream.status != 200 or task != "chat":
            try:
                answer = json.loads(await upstream.whole())
            except ValueError:
                answer = None
            return JSONResponse(
                {**said, "status": upstream.status, "response": answer},
                status_code=200 if upstream.status == 200 else 502,
            )
        return StreamingResponse(_relay(said, upstream), media_type="text/event-stream")


async def _relay(said: dict[str, Any], upstream: EndpointAnswer) -> AsyncIterator[bytes]:
    """Who answers first (event ``nodeau``), then the endpoint's own stream as it comes."""
    try:
        yield _sse("nodeau", said)
        async for chunk in upstream.chunks():
            yield chunk
    finally:
        await upstream.close()


def create_app(
    plane: Plane,
    *,
    model_rows: Callable[[], Sequence[StatusRow]],
    token: Token,
    clock: Callable[[], datetime],
    client: EndpointClient,
    qualifications: Callable[[], Sequence[ModelQualification]] = tuple,
    cards: Callable[[], MachineReading | None] = no_reading,
    metrics: MetricsTexts | None = None,
) -> Starlette:
    """The dashboard app over ``plane``; ``client`` reaches the workloads' endpoints
    (the Playground's calls); ``qualifications``: each model's, as ``nodeau model info`` says
    them (none by default); ``cards``: this machine's cards as read now (none by default);
    ``metrics``: the endpoints' counters (None: no Traffic table)."""
    dashboard = Dashboard(plane, model_rows, token, clock, client, qualifications, cards, metrics)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with client.opened():
            await dashboard.start()
            yield

    routes = [
        Route("/", dashboard.index, methods=["GET"]),
        Route(HEALTH_PATH, dashboard.health, methods=["GET"]),
        Route("/api/session", dashboard.session, methods=["GET"]),
        Route("/api/board", dashboard.board, methods=["GET"]),
        Route("/api/batches/{name}/stop", dashboard.stop_batch, methods=["POST"]),
        Route("/api/playground/{name}", dashboard.describe, methods=["GET"]),
        Route("/api/playground/{name}/{task:str}", dashboard.call, methods=["POST"]),
        Mount("/assets", StaticFiles(directory=static_folder())),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token)],
        lifespan=lifespan,
    )
