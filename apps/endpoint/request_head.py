"""The endpoint's HTTP/1.1 server protocol: uvicorn's httptools protocol, with a bound on the
size of a request's head, and a response's head sent with its body.

Decisions:

* httptools (llhttp, in C) parses requests: uvicorn's pure-Python h11 protocol cost several
  times as much CPU per request (bench/proxy.py). llhttp rejects malformed requests itself
  (uvicorn answers 400), but it accepts a request line and headers of any size, gathering
  them in memory; h11 stopped at 16 KiB.
* So a request whose head (request line and headers) passes ``MAX_HEAD_BYTES`` (16 KiB, as
  h11 allowed) before it is complete is answered 431 with an OpenAI-style JSON error, and its
  connection is closed; no more of it is parsed. Bytes are counted as they arrive, from the
  end of the previous request on the connection, so the head held in memory stays within
  the bound plus one read.
* uvicorn writes a response's head (status line and headers) as soon as the app starts the
  response, and its body with the next message: two writes, and a client woken twice, for an
  answer whose head and body the endpoint sends one after the other. So each response's
  head is held (``HeadWithBody``) until its next write, which it joins, or until the end of
  the event loop's current turn, whichever comes first: a stream's head still leaves at
  once, before the endpoint waits for its first event.
* The app learns that its client left from a future in the request's ASGI extensions
  (``CLIENT_GONE``: ``{"future": ...}``), resolved when the connection is lost with the
  response unfinished: it costs the app a callback where a task calling ``receive`` cost it
  a task per request (about a tenth of the endpoint's CPU per proxied request,
  bench/proxy.py). An app under another server, without the extension, watches
  ``receive`` as ASGI has it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

MAX_HEAD_BYTES = 16 * 1024
CLIENT_GONE = "nodeau.client_gone"  # ASGI extension: {"future": done once the client left}
HELD_JOIN_BYTES = 64 * 1024  # a larger body is not copied to join its head: two buffers


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


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a request head over ``MAX_HEAD_BYTES`` (431)."""

    max_head_bytes = MAX_HEAD_BYTES

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: Any = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._in_head = True
        self._head_bytes = 0
        self._refused = False
        self._watched: list[tuple[RequestResponseCycle, asyncio.Future[None]]] = []

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.max_head_bytes and self.parser is not None:
            self._refused = True
            if not self.transport.is_closing():
                self.logger.warning(
                    "A request head over %d bytes was refused (431).", self.max_head_bytes
                )
                self.transport.write(head_too_large(self.max_head_bytes))
                self.transport.close()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # not refused or upgraded
            cycle.transport = HeadWithBody(self.transport, self.loop)
            gone = self.loop.create_future()
            cycle.scope.setdefault("extensions", {})[CLIENT_GONE] = {"future": gone}
            watched = [(c, f) for c, f in self._watched if not c.response_complete]
            watched.append((cycle, gone))
            self._watched = watched

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        watched, self._watched = self._watched, []
        for cycle, gone in watched:
            if not cycle.response_complete and not gone.done():
                gone.set_result(None)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0


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
