"""The endpoint's HTTP/1.1 server protocol (the dashboard's too): uvicorn's httptools
protocol, within bounds on a request's head, time and connections, and a response's head sent
with its body.

Why it is so: docs/adr/decisions/apps-endpoint.md (request_head.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar
from weakref import WeakKeyDictionary

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from nodeau.apps.endpoint.limits import (
    Limits,
    Shared,
    body_timed_out,
    head_timed_out,
    not_http,
    too_many_bodies,
    too_many_connections,
)

MAX_HEAD_BYTES = 16 * 1024
CLIENT_GONE = "nodeau.client_gone"  # ASGI extension: {"future": done once the client left}
HELD_JOIN_BYTES = 64 * 1024  # a larger body is not copied to join its head: two buffers
_IDLE, _HEAD, _BODY = 0, 1, 2  # what a connection is reading
_SHARED: WeakKeyDictionary[ServerState, Shared] = WeakKeyDictionary()


def head_too_large(limit: int) -> bytes:
    """The whole 431 response, bytes on the wire."""
    body = json.dumps(
        {
            "error": {
                "message": f"the request line and headers are larger than this endpoint "
                f"accepts ({limit // 1024} KiB)",
                "type": "request_too_large",
                "code": 431,
            }
        },
        separators=(",", ":"),
    ).encode()
    return (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        b"content-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )


class _Refused(Exception):
    """Raised in a parser callback that refused the request: the parser stops."""


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol within ``limits`` (``within`` makes one with others):
    a head over ``MAX_HEAD_BYTES`` is a 431, one not whole in time a 408, and so on above."""

    max_head_bytes = MAX_HEAD_BYTES
    limits: ClassVar[Limits] = Limits()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: Any = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.shared = _SHARED.setdefault(server_state, Shared())
        self._reading = _IDLE
        self._head_bytes = 0  # received since the last request's end
        self._refused = False
        self._watched: list[tuple[RequestResponseCycle, asyncio.Future[None]]] = []
        self._deadline: asyncio.TimerHandle | None = None
        self._over = False  # opened over the cap with no idle connection to close for it
        self._body_bytes = 0  # held of the body still arriving

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limits, order = self.limits, self.shared.order
        order[self] = None
        self._deadline = self.loop.call_later(limits.head_timeout_s, self._timed_out)
        if len(self.connections) > limits.max_connections:
            oldest = next((c for c in order if c is not self and c.idle()), None)
            if oldest is None:
                self._over = True  # every other one is busy: answered 503 unless one ends
            else:
                oldest.evict()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._unset_keepalive_if_required()
        reading = self._reading
        if reading != _BODY:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self._refused:
                return  # by one of the callbacks: answered already
            self.logger.warning("A request that is not HTTP/1.1 was refused (400): %s", exc)
            self._refuse(not_http(str(exc) or type(exc).__name__))
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        reading = self._reading
        if not reading or self._refused:
            return  # the usual case: every request received is whole
        if reading == _HEAD:
            if self._head_bytes > self.max_head_bytes and self.parser is not None:
                self.logger.warning(
                    "A request head over %d bytes was refused (431).", self.max_head_bytes
                )
                self._refuse(head_too_large(self.max_head_bytes))
                return
            timeout_s = self.limits.head_timeout_s
        else:
            self._hold_body(len(data))
            timeout_s = self.limits.body_timeout_s
        if self._deadline is None and not self._refused:
            self._deadline = self.loop.call_later(timeout_s, self._timed_out)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading = _HEAD

    def on_headers_complete(self) -> None:
        self._reading = _BODY
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._head_bytes > self.max_head_bytes and self._head_size() > self.max_head_bytes:
            self.logger.warning(
                "A request head over %d bytes was refused (431).", self.max_head_bytes
            )
            self._refuse(head_too_large(self.max_head_bytes))  # it came whole in one read
            raise _Refused  # the parser stops here
        self.shared.order.move_to_end(self)
        if self.url[:1] != b"/":
            self._host_from_target()
        if self._over:
            self._over = False
            if len(self.connections) > self.limits.max_connections:
                self.logger.warning(
                    "A connection over the cap of %d was refused (503).",
                    self.limits.max_connections,
                )
                self._refuse(too_many_connections(self.limits.max_connections))
                raise _Refused
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # not refused or upgraded
            cycle.transport = HeadWithBody(self.transport, self.loop)
            gone = self.loop.create_future()
            cycle.scope.setdefault("extensions", {})[CLIENT_GONE] = {"future": gone}
            watched = [(c, f) for c, f in self._watched if not c.response_complete]
            watched.append((cycle, gone))
            self._watched = watched

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading = _IDLE
        self._head_bytes = 0
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._body_bytes:
            self._release_body()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.shared.order.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._body_bytes:
            self._release_body()
        watched, self._watched = self._watched, []
        for cycle, gone in watched:
            if not cycle.response_complete and not gone.done():
                gone.set_result(None)

    def idle(self) -> bool:
        """Whether no request is in progress here (so it may be closed for a new one)."""
        cycle = self.cycle
        return (
            not self._refused
            and not self.transport.is_closing()
            and (cycle is None or cycle.response_complete)
            and not self.pipeline
        )

    def evict(self) -> None:
        """Close this idle connection for a newer one: with a 503 unless it sits between
        requests (kept alive, or its answer sent while its body still arrives)."""
        between = self._reading == _BODY or (self._reading == _IDLE and self.cycle is not None)
        self._refuse(b"" if between else too_many_connections(self.limits.max_connections))

    def _timed_out(self) -> None:
        self._deadline = None
        if self._refused or self.transport.is_closing():
            return
        if self.flow.read_paused:  # this server is not reading: the client is not late
            timeout_s = self.limits.body_timeout_s
            self._deadline = self.loop.call_later(timeout_s, self._timed_out)
            return
        if self._reading == _HEAD:
            timeout_s = self.limits.head_timeout_s
            self.logger.warning("A request head not whole within %g s was closed (408).", timeout_s)
            self._refuse(head_timed_out(timeout_s))
        elif self._reading == _BODY:
            timeout_s = self.limits.body_timeout_s
            self.logger.warning("A request body not whole within %g s was closed (408).", timeout_s)
            started = self.cycle is not None and self.cycle.response_started
            self._refuse(b"" if started else body_timed_out(timeout_s))
        else:
            self._refuse(b"")  # opened, and nothing sent on it

    def _refuse(self, answer: bytes) -> None:
        """Send ``answer`` (if any) and close: nothing more is read from this connection."""
        self._refused = True
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if not self.transport.is_closing():
            if answer:
                self.transport.write(answer)
            self.transport.close()

    def _head_size(self) -> int:
        """The size of the request line and headers just parsed (as sent, near enough)."""
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def _hold_body(self, size: int) -> None:
        """Count ``size`` more bytes of a body still arriving; past what all may hold, refuse."""
        self._body_bytes += size
        shared = self.shared
        shared.arriving_body_bytes += size
        if shared.arriving_body_bytes > self.limits.max_arriving_body_bytes:
            limit = self.limits.max_arriving_body_bytes
            self.logger.warning("A request body past the memory for bodies was refused (503).")
            self._refuse(too_many_bodies(limit) if not self.cycle.response_started else b"")

    def _release_body(self) -> None:
        self.shared.arriving_body_bytes -= self._body_bytes
        self._body_bytes = 0

    def _host_from_target(self) -> None:
        """An absolute-form request (``GET http://host/path``) names its host in its target,
        which stands for its ``Host`` (RFC 9112, 3.2.2): the Host rule then judges it."""
        _scheme, sep, rest = self.url.partition(b"://")
        if not sep:
            return  # "*", or not a URL: the router answers it
        authority = rest
        for end in (b"/", b"?", b"#"):
            authority = authority.partition(end)[0]
        self.headers[:] = [(n, v) for n, v in self.headers if n != b"host"]
        self.headers.append((b"host", authority))


def within(limits: Limits) -> type[BoundedHeadProtocol]:
    """The protocol with ``limits`` (for ``uvicorn.Config(http=...)``)."""

    class Limited(BoundedHeadProtocol):
        pass

    Limited.limits = limits
    return Limited


class HeadWithBody(asyncio.Transport):
    """The connection as one response sees it: its first write (the head) is held until its
    next write, sent together, or until the end of the event loop's current turn."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._started:
            self._started = True
            self._head = bytes(data)
            self._loop.call_soon(self._send_head)
            return
        head, self._head = self._head, None
        if head is None:
            self._transport.write(data)
        elif len(data) < HELD_JOIN_BYTES:
            self._transport.write(head + data)
        else:
            self._transport.writelines((head, data))

    def _send_head(self) -> None:
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self._send_head()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)
