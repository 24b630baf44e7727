"""Connections from the endpoint to its model server: idle keep-alive connections on a stack.

Why it is so: docs/adr/decisions/apps-endpoint.md (connections.py).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from functools import lru_cache

import httpx
from attrs import frozen

from nodeau.apps.endpoint.model_server import (
    Answer,
    ConnectTimedOut,
    Headers,
    ModelServerConnection,
    NoFreeConnection,
    NotReached,
    NotSent,
)

_Origin = tuple[str, int]  # host, port


@frozen(kw_only=True)
class Target:
    """Where one request goes: the server's host and port, its ``Host`` header, and the
    request target (path and query, percent-encoded)."""

    host: str
    port: int
    host_header: bytes
    path: bytes


def upstream_target(base_url: str, path: str, query: bytes) -> Target:
    """Where a route's request goes: ``path`` (and the client's ``query``) on the model
    server at ``base_url``; ``NotReached`` when that is not an ``http://`` URL."""
    if not query:
        return _route_target(base_url, path)
    return _parsed(base_url.rstrip("/") + path + "?" + query.decode("latin-1"))


@lru_cache(maxsize=64)
def _route_target(base_url: str, path: str) -> Target:
    return _parsed(base_url.rstrip("/") + path)


def _parsed(text: str) -> Target:
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise NotReached(f"its address is not a URL ({exc})") from exc
    if url.scheme != "http":
        raise NotReached(f"only http:// model servers are reached, not {url.scheme}://")
    if not url.host:
        raise NotReached("its address names no host")
    return Target(host=url.host, port=url.port or 80, host_header=url.netloc, path=url.raw_path)


def request_head(method: bytes, target: Target, headers: Headers, length: int) -> bytes:
    """A request's line and headers, ``Host`` and ``Content-Length`` added, up to and with
    the blank line that ends them. ``NotSent`` when a header's name or value holds a CR or
    LF (it cannot: uvicorn's llhttp refused such a request from the client; this keeps it
    so if that changes, rather than send a header the client did not)."""
    lines = b"".join([b"%s: %s\r\n" % header for header in headers])
    if lines.count(b"\r") != len(headers) or lines.count(b"\n") != len(headers):
        raise NotSent("a request header holds a line break; it was not sent")
    return b"%s %s HTTP/1.1\r\nHost: %s\r\n%bContent-Length: %d\r\n\r\n" % (
        method,
        target.path,
        target.host_header,
        lines,
        length,
    )


class ModelServerConnections:
    """HTTP/1.1 to a few model servers, reusing idle connections last-in first-out."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_idle: int,
        keepalive_expiry_s: float,
        connect_timeout_s: float,
        write_timeout_s: float,
        pool_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slots = asyncio.Semaphore(max_connections)
        self._max_idle = max_idle
        self._expiry_s = keepalive_expiry_s
        self._connect_timeout_s = connect_timeout_s
        self._write_timeout_s = write_timeout_s
        self._pool_timeout_s = pool_timeout_s
        self._clock = clock
        self._idle: dict[_Origin, list[ModelServerConnection]] = {}

    async def send(self, target: Target, method: bytes, headers: Headers, body: bytes) -> Answer:
        """Send one request and return its answer once the answer's head is whole; the
        caller reads the body and closes the answer (``Answer.close``), which frees its slot.
        Raises ``UpstreamError``."""
        await self._take_slot()
        try:
            head = request_head(method, target, headers, len(body))
            connection = await self._connection((target.host, target.port))
            answer = await connection.request(head, body, self._write_timeout_s)
        except BaseException:
            self._slots.release()
            raise
        answer.close_callback = self._give_back
        return answer

    async def aclose(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, {}
        for stack in idle.values():
            for connection in stack:
                connection.close()

    async def __aenter__(self) -> ModelServerConnections:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _take_slot(self) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # free: taken at once, no timer
            return
        try:
            async with asyncio.timeout(self._pool_timeout_s):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise NoFreeConnection(self._pool_timeout_s) from exc

    async def _connection(self, origin: _Origin) -> ModelServerConnection:
        stack = self._idle.get(origin)
        if stack:
            now = self._clock()
            while stack:
                connection = stack.pop()
                if connection.reusable() and now < connection.idle_until:
                    return connection
                connection.close()
        return await self._connect(origin)

    async def _connect(self, origin: _Origin) -> ModelServerConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                transport, connection = await loop.create_connection(ModelServerConnection, *origin)
        except TimeoutError as exc:
            raise ConnectTimedOut(
                f"it did not accept a connection within {self._connect_timeout_s:g} s"
            ) from exc
        except ConnectionRefusedError as exc:
            raise NotReached("nothing answers there (it may be restarting)") from exc
        except OSError as exc:
            raise NotReached(f"cannot connect to it ({exc.strerror or exc})") from exc
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.origin = origin
        return connection

    def _give_back(self, connection: ModelServerConnection) -> None:
        try:
            if not connection.reusable():
                return  # closed already
            stack = self._idle.setdefault(connection.origin, [])
            if len(stack) < self._max_idle:
                connection.idle_until = self._clock() + self._expiry_s
                stack.append(connection)
            else:
                connection.close()
        finally:
            self._slots.release()
