"""One HTTP/1.1 connection from the endpoint to its model server, and the answer it reads.

Why it is so: docs/adr/decisions/apps-endpoint.md (model_server.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

import httptools

HIGH_WATER = 256 * 1024
MAX_HEAD_BYTES = 100 * 1024

Headers = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The model server was not reached, or did not answer in HTTP/1.1; the message says
    what happened, in words that follow "cannot reach the model server at URL: " (or "no
    valid answer from ...", ``BadAnswer``) in the endpoint's 502."""


class NotReached(UpstreamError):
    """No connection to the model server (refused, unreachable, no such host)."""


class ConnectTimedOut(UpstreamError):
    """The model server did not accept a connection in time."""


class NoFreeConnection(UpstreamError):
    """Every connection to the model server is busy, and none came free in ``waited_s``."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"no connection came free within {waited_s:g} s")
        self.waited_s = waited_s


class NotSent(UpstreamError):
    """The request could not be written (the connection failed, or stayed full too long)."""


class BadAnswer(UpstreamError):
    """No valid answer's head: the server closed the connection, or sent what is not HTTP."""


class BrokeOff(UpstreamError):
    """The answer's head was whole, its body was not: closed early or garbled."""


class Answer:
    """One answer as it arrives: ``status`` and ``headers`` once its head is whole
    (``head``), then the parts of its body (``take``, ``arrival``) until ``complete``.
    ``close`` gives its connection back (or closes it); ``close_callback`` is told which."""

    __slots__ = (
        "_error",
        "_parts",
        "_waiter",
        "buffered",
        "close_callback",
        "complete",
        "connection",
        "head_bytes",
        "head_done",
        "headers",
        "interim",
        "status",
    )

    def __init__(self, connection: ModelServerConnection) -> None:
        self.connection = connection
        self.status = 0
        self.headers: Headers = []
        self.head_done = False
        self.head_bytes = 0
        self.interim = False
        self.complete = False
        self.buffered = 0
        self.close_callback: Callable[[ModelServerConnection], None] | None = None
        self._parts: list[bytes] = []
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def head(self) -> None:
        """Wait until the head is whole; raises ``BadAnswer`` (or the connection's error)."""
        while not self.head_done:
            if self._error is not None:
                raise self._error
            await self._wait()

    def take(self) -> bytes:
        """Every part of the body that has arrived and not been taken, joined (``b""`` when
        none); once this is empty and ``complete`` is true, the body has been read whole."""
        parts = self._parts
        if not parts:
            return b""
        self._parts = []
        self.buffered = 0
        self.connection.taken()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def arrival(self, at_least: int = 1) -> None:
        """Wait until ``at_least`` bytes of the body wait to be taken, or it is complete;
        raises ``BrokeOff`` when it broke off first."""
        while not self.complete and self.buffered < at_least:
            if self._error is not None:
                raise self._error
            await self._wait()

    def close(self) -> None:
        """Done with the answer, read whole or not (its connection is closed if not)."""
        self.connection.finished(self)

    # -- the connection's side

    def added(self, part: bytes) -> None:
        self._parts.append(part)
        self.buffered += len(part)
        self._wake()

    def ended(self) -> None:
        self.complete = True
        self._wake()

    def failed(self, error: UpstreamError) -> None:
        if self._error is None:
            self._error = error
        self._wake()

    def head_is_done(self) -> None:
        self.head_done = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None


class ModelServerConnection(asyncio.Protocol):
    """One connection to a model server, one request at a time (``request``)."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._answer: Answer | None = None
        self._keep_alive = False
        self._reading_paused = False
        self._write_ready: asyncio.Future[None] | None = None
        self.closed = False
        self.origin: tuple[str, int] = ("", 0)  # host and port, set by whoever connects it
        self.idle_until = 0.0  # when a kept-alive connection expires (monotonic seconds)

    # -- what the pool calls

    async def request(self, head: bytes, body: bytes, write_timeout_s: float | None) -> Answer:
        """Send one request (``head`` ends in its blank line) and wait for its answer's head.
        Raises ``UpstreamError``; the connection is then closed."""
        transport = self._transport
        if self.closed or transport is None:
            raise NotSent("the connection closed before the request was sent")
        answer = Answer(self)
        self._answer = answer
        self._keep_alive = False
        try:
            transport.write(head + body if len(body) < HIGH_WATER else head)
            if len(body) >= HIGH_WATER:
                transport.write(body)
            if self._write_ready is not None:
                await self._drained(write_timeout_s)
            await answer.head()
        except BaseException:
            self.close()
            raise
        return answer

    def reusable(self) -> bool:
        """Whether this idle connection may carry another request."""
        return not self.closed and self._answer is None

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def finished(self, answer: Answer) -> None:
        """``answer`` is done with: keep the connection only if it ended whole and may be
        reused; then tell the pool (``answer.close_callback``)."""
        if self._answer is answer:
            self._answer = None
            if not (answer.complete and self._keep_alive and not self.closed):
                self.close()
        callback, answer.close_callback = answer.close_callback, None
        if callback is not None:
            callback(self)

    def taken(self) -> None:
        """The body's parts were taken: read again if reading was paused for them."""
        if self._reading_paused and self._transport is not None and not self.closed:
            self._reading_paused = False
            self._transport.resume_reading()

    async def _drained(self, timeout_s: float | None) -> None:
        ready = self._write_ready
        if ready is None:
            return
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(ready)
        except TimeoutError as exc:
            raise NotSent(f"the model server took nothing for {timeout_s:g} s") from exc

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        answer = self._answer
        if answer is None or answer.complete:
            self.close()  # bytes nobody asked for: the connection cannot be trusted
            return
        if not answer.head_done:
            answer.head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(answer, f"{exc}" or type(exc).__name__)
            return
        if not answer.head_done and answer.head_bytes > MAX_HEAD_BYTES:
            self._fail(answer, f"its head is larger than {MAX_HEAD_BYTES // 1024} KiB")

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ready = self._write_ready
        if ready is not None and not ready.done():
            ready.set_result(None)
        answer = self._answer
        if answer is None or answer.complete:
            return
        why = f" ({' '.join(str(exc).split()) or type(exc).__name__})" if exc else ""
        if not answer.head_done:
            if answer.head_bytes == 0:
                answer.failed(BadAnswer(f"it closed the connection without an answer{why}"))
            else:
                answer.failed(BadAnswer(f"it closed the connection mid-head{why}"))
        elif exc is None and self._ends_at_close(answer):
            answer.ended()
        else:
            answer.failed(BrokeOff(f"it closed the connection mid-answer{why}"))

    def pause_writing(self) -> None:
        if self._write_ready is None:
            self._write_ready = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        ready, self._write_ready = self._write_ready, None
        if ready is not None and not ready.done():
            ready.set_result(None)

    # -- httptools' callbacks

    def on_message_begin(self) -> None:
        answer = self._answer
        if answer is not None and answer.complete:
            self._keep_alive = False  # a second answer to one request: not reused

    def on_header(self, name: bytes, value: bytes) -> None:
        answer = self._answer
        if answer is not None and not answer.complete:
            answer.headers.append((name, value))

    def on_headers_complete(self) -> None:
        answer = self._answer
        if answer is None or answer.complete:
            return
        status = self._parser.get_status_code()
        if status == 101:
            self._fail(answer, "it switched protocols (101), which nobody asked for")
        elif 100 <= status < 200:  # interim (100 Continue, 103 Early Hints): the answer follows
            answer.interim = True
            answer.headers = []
        else:
            answer.status = status
            self._keep_alive = self._parser.should_keep_alive()
            answer.head_is_done()

    def on_body(self, body: bytes) -> None:
        answer = self._answer
        if answer is None or answer.complete:
            return
        answer.added(body)
        if answer.buffered > HIGH_WATER and not self._reading_paused:
            self._reading_paused = True
            if self._transport is not None:
                self._transport.pause_reading()

    def on_message_complete(self) -> None:
        answer = self._answer
        if answer is None or answer.complete:
            return
        if answer.interim:
            answer.interim = False
            return
        answer.ended()

    # -- helpers

    def _fail(self, answer: Answer, why: str) -> None:
        if answer.complete:
            pass  # it ended whole before what followed: only the connection is spoiled
        elif answer.head_done:
            answer.failed(BrokeOff(f"its answer broke off: {why}"))
        else:
            answer.failed(BadAnswer(f"its answer is not valid HTTP/1.1: {why}"))
        self.close()

    @staticmethod
    def _ends_at_close(answer: Answer) -> bool:
        """Whether the answer's body runs until the connection closes (no framing)."""
        if answer.status in (204, 304):
            return False
        framed = (b"content-length", b"transfer-encoding")
        return not any(name.lower() in framed for name, _ in answer.headers)
