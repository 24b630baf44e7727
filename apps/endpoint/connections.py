"""Connections from the endpoint to its model server: idle keep-alive connections on a stack.

Decisions:

* httpx's own pool (httpcore 1.0's ``AsyncConnectionPool``) looks at every pooled connection,
  and polls each idle one's socket, on every request it queues or releases, and counts all
  connections where it means idle ones. At 32 concurrent requests that was about two thirds
  of the endpoint's CPU (bench/proxy.py, profiled). This transport keeps each origin's idle
  connections on a stack (last used, first reused: the one least likely to have been closed
  by the server) and looks only at the connection it takes. It is an httpx transport, so the
  endpoint still speaks httpx: requests, responses, time-outs and exceptions are httpx's, and
  httpcore speaks HTTP/1.1 on each connection.
* Each connection is httpcore's ``AsyncHTTP11Connection`` over an asyncio stream
  (``streams.AsyncioBackend``), without the ``AsyncHTTPConnection`` wrapper (HTTP/2
  negotiation, TLS, a lock per request: none of which a model server on this machine, spoken
  to in plain HTTP/1.1, needs). An origin that is not ``http://`` is refused
  (``UnsupportedProtocol``).
* A taken connection that has expired, or that the server has closed (its socket reads as
  ready), is closed and the next one is tried; a request never goes out on it.
* At most ``max_connections`` requests are in flight; one more waits for a slot as long as
  the request's pool time-out, then fails with ``httpx.PoolTimeout``. A free slot is taken
  without a timer (the endpoint runs on asyncio: an asyncio semaphore).
* At most ``max_idle`` idle connections are kept per origin; a response that is closed
  before its end closes its connection (httpcore's rule), so it is never reused half-read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpcore
import httpx

from nodeau.apps.endpoint.streams import AsyncioBackend

_Key = tuple[bytes, int]  # host, port

# Most specific first: an httpcore error becomes the first httpx error it is an instance of.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core, ours in _ERRORS:
            if isinstance(exc, core):
                raise ours(str(exc)) from exc
        raise


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 to a few origins, reusing idle connections last-in first-out."""

    def __init__(self, *, max_connections: int, max_idle: int, keepalive_expiry_s: float) -> None:
        self._slots = asyncio.Semaphore(max_connections)
        self._max_idle = max_idle
        self._expiry_s = keepalive_expiry_s
        self._idle: dict[_Key, list[httpcore.AsyncHTTP11Connection]] = {}
        self._network = AsyncioBackend()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"only http:// model servers are reached, not {url.scheme}://"
            )
        key = (url.raw_host, url.port or 80)
        timeouts = request.extensions.get("timeout", {})
        await self._take_slot(timeouts.get("pool"))
        try:
            with _httpx_errors():
                connection = await self._connection(key, timeouts.get("connect"))
                core_request = httpcore.Request(
                    method=request.method,
                    url=httpcore.URL(scheme=b"http", host=key[0], port=key[1], target=url.raw_path),
                    headers=request.headers.raw,
                    content=request.stream,
                    extensions=request.extensions,
                )
                core_response = await connection.handle_async_request(core_request)
        except BaseException:
            self._slots.release()
            raise
        return httpx.Response(
            status_code=core_response.status,
            headers=core_response.headers,
            stream=_Body(self, key, connection, core_response),
            extensions=core_response.extensions,
        )

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for stack in idle.values():
            for connection in stack:
                await connection.aclose()

    async def _take_slot(self, timeout_s: float | None) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # free: taken at once, no timer
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise httpx.PoolTimeout(f"no connection came free within {timeout_s:g} s") from exc

    async def _connection(
        self, key: _Key, connect_timeout_s: float | None
    ) -> httpcore.AsyncHTTP11Connection:
        stack = self._idle.get(key, [])
        while stack:
            connection = stack.pop()
            if connection.is_available() and not connection.has_expired():
                return connection
            await connection.aclose()
        stream = await self._network.connect_tcp(
            key[0].decode("ascii"), key[1], timeout=connect_timeout_s
        )
        return httpcore.AsyncHTTP11Connection(
            origin=httpcore.Origin(b"http", *key), stream=stream, keepalive_expiry=self._expiry_s
        )

    async def _give_back(self, key: _Key, connection: httpcore.AsyncHTTP11Connection) -> None:
        try:
            stack = self._idle.setdefault(key, [])
            if connection.is_available() and len(stack) < self._max_idle:
                stack.append(connection)
            else:
                await connection.aclose()
        finally:
            self._slots.release()


class _Body(httpx.AsyncByteStream):
    """A response body; closing it gives its connection back, once."""

    def __init__(
        self,
        transport: KeepAliveTransport,
        key: _Key,
        connection: httpcore.AsyncHTTP11Connection,
        response: httpcore.Response,
    ) -> None:
        self._transport = transport
        self._key = key
        self._connection: httpcore.AsyncHTTP11Connection | None = connection
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._response.aiter_stream():
                yield part

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            with _httpx_errors():
                await self._response.aclose()
        finally:
            await self._transport._give_back(self._key, connection)
