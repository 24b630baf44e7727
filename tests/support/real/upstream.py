"""A minimal OpenAI-compatible model server on 127.0.0.1, for the endpoint's tests and bench.

It answers like llama-server (chat plain or SSE, embeddings, rerank; ``*`` CORS on each answer)
and keeps what it saw; ``gate`` holds answers until a test releases it. ``serving`` runs any ASGI
app in a bounded thread; ``python -m tests.support.real.upstream`` serves it (bench/proxy.py).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn
from attrs import define, field, frozen
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UPSTREAM_MARK = "upstream:"
STREAM_CHUNKS = 5
GATE_S = 10.0
START_S = 10.0  # bound on a server's start and stop


@frozen(kw_only=True)
class Seen:
    """One request as the upstream received it."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name.lower()]


@define
class StreamLog:
    """When one stream sent each event (time.monotonic), and how its gate ended."""

    sent_at: list[float] = field(factory=list)
    released_by_client: bool | None = None  # None: no gate, or never reached
    ended: bool = False  # the stream's generator has finished, whole or cut short


@define
class MinimalUpstream:
    """The upstream's behaviour and what it saw; build its app with ``app()``."""

    model: str = "tiny"
    chunk_delay_s: float = 0.05
    gate: threading.Event | None = None
    record: bool = True
    arrived: list[str] = field(factory=list)  # "METHOD /path" of every request that arrived
    seen: list[Seen] = field(factory=list)
    streams: list[StreamLog] = field(factory=list)
    waits: list[str] = field(factory=list)  # each gated plain answer: how its wait ended

    def app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/completions", self._completion, methods=["POST"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/v1/rerank", self._rerank, methods=["POST"]),
        ]
        return Starlette(routes=routes, middleware=[Middleware(_AsLlamaServer, upstream=self)])

    async def _json(self, request: Request) -> dict[str, Any] | Response:
        body = await request.body()
        if self.record:
            self.seen.append(
                Seen(
                    method=request.method,
                    path=request.url.path,
                    query=request.url.query,
                    headers=tuple((k.decode(), v.decode()) for k, v in request.headers.raw),
                    body=body,
                )
            )
        try:
            parsed = json.loads(body)
        except ValueError as exc:
            return _error(500, f"{UPSTREAM_MARK} malformed JSON ({exc})")
        if not isinstance(parsed, dict):
            return _error(500, f"{UPSTREAM_MARK} the body is not a JSON object")
        return parsed

    async def _chat(self, request: Request) -> Response:
        asked = await self._json(request)
        if isinstance(asked, Response):
            return asked
        text = _last_user_text(asked)
        if asked.get("stream"):
            log = StreamLog()
            self.streams.append(log)
            return StreamingResponse(self._events(text, log), media_type="text/event-stream")
        if self.gate is not None:  # a long generation: answered once the gate opens
            self.waits.append("waiting")
            self.waits[-1] = await _wait_or_leave(self.gate, GATE_S, request)
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"echo: {text}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    async def _events(self, text: str, log: StreamLog) -> AsyncIterator[bytes]:
        try:
            for i in range(STREAM_CHUNKS):
                # A proxy that buffered would hold the first event back until the upstream had
                # finished, so only the wait's bound would end it: a release by the Event proves
                # the first event got through on its own.
                if i == 1 and self.gate is not None:
                    log.released_by_client = await _wait(self.gate, GATE_S)
                elif i > 0 and self.chunk_delay_s > 0:
                    await anyio.sleep(self.chunk_delay_s)
                chunk = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": self.model,
                    "choices": [
                        {"index": 0, "delta": {"content": f"{text}-{i} "}, "finish_reason": None}
                    ],
                }
                log.sent_at.append(time.monotonic())
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"
        finally:
            log.ended = True

    async def _completion(self, request: Request) -> Response:
        asked = await self._json(request)
        if isinstance(asked, Response):
            return asked
        return JSONResponse(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 1,
                "model": self.model,
                "choices": [
                    {"index": 0, "text": f"echo: {asked.get('prompt')}", "finish_reason": "stop"}
                ],
            }
        )

    async def _embeddings(self, request: Request) -> Response:
        asked = await self._json(request)
        if isinstance(asked, Response):
            return asked
        given = asked.get("input", "")
        texts = given if isinstance(given, list) else [given]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(str(t))), 1.0, 0.5]}
            for i, t in enumerate(texts)
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": self.model,
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            }
        )

    async def _rerank(self, request: Request) -> Response:
        asked = await self._json(request)
        if isinstance(asked, Response):
            return asked
        documents = asked.get("documents", [])
        results = [{"index": i, "relevance_score": 1.0 / (1 + i)} for i in range(len(documents))]
        return JSONResponse({"model": self.model, "object": "list", "results": results})


class _AsLlamaServer:
    """Around the routes: notes every request that arrives (``arrived``) and adds
    ``Access-Control-Allow-Origin: *`` to every answer, as llama-server does by default."""

    def __init__(self, app: ASGIApp, upstream: MinimalUpstream) -> None:
        self.app = app
        self.upstream = upstream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.upstream.record:
            self.upstream.arrived.append(f"{scope['method']} {scope['path']}")

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (b"access-control-allow-origin", b"*")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_cors)


def _error(status: int, message: str) -> Response:
    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error"}}, status_code=status
    )


def _last_user_text(asked: dict[str, Any]) -> str:
    messages = asked.get("messages") or [{}]
    content = messages[-1].get("content", "") if isinstance(messages[-1], dict) else ""
    return str(content)


async def _wait(gate: threading.Event, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while not gate.is_set():
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.002)
    return True


async def _wait_or_leave(gate: threading.Event, bound_s: float, request: Request) -> str:
    """ "released", "timed out", or "client left" (a model server notices its client leaving)."""
    deadline = time.monotonic() + bound_s
    while not gate.is_set():
        if await request.is_disconnected():
            return "client left"
        if time.monotonic() > deadline:
            return "timed out"
        await anyio.sleep(0.002)
    return "released"


def loopback_socket(port: int = 0) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0: a free one). Its protocol is named:
    asyncio sets TCP_NODELAY only on sockets whose ``proto`` is TCP, and without it a
    response written in two parts waits for the client's delayed ACK (40 ms)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def free_port() -> int:
    """A port free on 127.0.0.1 now (another process could take it before it is used)."""
    with loopback_socket() as sock:
        return int(sock.getsockname()[1])


def bound_port(server: uvicorn.Server) -> int:
    """The port a started uvicorn server listens on."""
    return int(server.servers[0].sockets[0].getsockname()[1])


@contextmanager
def serving(server: uvicorn.Server, sock: socket.socket | None = None) -> Iterator[uvicorn.Server]:
    """Run ``server`` in a thread until the block ends (on ``sock`` when given, else where
    its config says); bounded by START_S each way."""
    sockets = [sock] if sock is not None else None
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(START_S)
        if sock is not None:
            sock.close()
        if thread.is_alive():
            raise RuntimeError("the test server did not stop")


def upstream_config(app: Starlette) -> uvicorn.Config:
    return uvicorn.Config(app, lifespan="off", log_level="warning", http="h11", loop="asyncio")


@contextmanager
def running_upstream(upstream: MinimalUpstream) -> Iterator[str]:
    """Serve ``upstream`` on a free 127.0.0.1 port; yields its base URL."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    with serving(uvicorn.Server(upstream_config(upstream.app())), sock):
        yield f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description="the minimal upstream, in its own process")
    parser.add_argument("--chunk-delay-s", type=float, default=0.0)
    args = parser.parse_args()
    upstream = MinimalUpstream(chunk_delay_s=args.chunk_delay_s, record=False)
    sock = loopback_socket()
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(upstream_config(upstream.app())).run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
