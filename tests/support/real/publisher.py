"""A publisher on 127.0.0.1 for tests and benchmarks: serves files with Range, injects faults.

Faults per path: a cut, wrong bytes, a stall, an error status, Range ignored, no Content-Length.
Every request is logged with its Range. Closing it wakes, shuts and joins everything.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from attrs import field, frozen

_CHUNK = 1024 * 1024
_INVERT = bytes(255 - b for b in range(256))
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@frozen(kw_only=True)
class Faults:
    """What goes wrong when a path is requested (nothing, by default)."""

    cut_after: int | None = None  # send this many body bytes, then close the connection
    wrong_bytes: bool = False  # every byte inverted: the right length, the wrong content
    stall_after: int | None = None  # send this many body bytes, then go silent for stall_s
    stall_s: float = 10.0  # bounded: closing the publisher ends the stall at once
    status: int | None = None  # answer this status with a short body instead
    ignore_range: bool = False  # answer 200 and the whole body even to a Range request
    send_length: bool = True  # False: no Content-Length, the body ends at connection close
    moved_to: str | None = None  # answer 302 with this Location (a hub's CDN does)

    def __attrs_post_init__(self) -> None:
        if self.cut_after is not None and self.stall_after is not None:
            raise ValueError("a response is either cut or stalled, not both")


@frozen(kw_only=True)
class Served:
    body: bytes | Path
    faults: Faults

    @property
    def size(self) -> int:
        return len(self.body) if isinstance(self.body, bytes) else self.body.stat().st_size


@frozen(kw_only=True)
class RequestLog:
    """One request as the publisher received it."""

    path: str
    range: str | None


@frozen(kw_only=True)
class _Answer:
    status: int
    start: int
    length: int
    headers: dict[str, str] = field(factory=dict)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread
    block_on_close = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, Served] = {}
        self.log: list[RequestLog] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.connections: set[socket.socket] = set()
        self.errors: list[str] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hung up mid-body is expected in these tests; keep stderr quiet
        self.errors.append(f"handler error for {client_address}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # a backstop: no handler waits on a silent client for longer
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        wanted = self.headers.get("Range")
        with self.server.lock:
            self.server.log.append(RequestLog(path=self.path, range=wanted))
            served = self.server.files.get(self.path)
        if served is None:
            self._short(404, "no such file")
            return
        faults = served.faults
        if faults.status is not None:
            self._short(faults.status, "injected failure")
            return
        if faults.moved_to is not None:
            self.send_response(302)
            self.send_header("Location", faults.moved_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        answer = _answer(served.size, None if faults.ignore_range else wanted)
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        if answer.status == 416:
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if faults.send_length:
            self.send_header("Content-Length", str(answer.length))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self._send_body(served, answer.start, answer.length)

    def _short(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_body(self, served: Served, start: int, length: int) -> None:
        faults = served.faults
        limit = length
        for fault in (faults.cut_after, faults.stall_after):
            if fault is not None:
                limit = min(limit, fault)
        self._send_range(served, start, limit)
        if faults.cut_after is not None and faults.cut_after < length:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        stalls = faults.stall_after is not None and faults.stall_after < length
        if stalls and self.server.closing.wait(faults.stall_s):
            return  # the publisher is closing: end the stall and the response
        self._send_range(served, start + limit, length - limit)

    def _send_range(self, served: Served, start: int, length: int) -> None:
        if length <= 0:
            return
        body, invert = served.body, served.faults.wrong_bytes
        if isinstance(body, bytes):
            view = memoryview(body)[start : start + length]
            for offset in range(0, length, _CHUNK):
                piece = bytes(view[offset : offset + _CHUNK])
                self.wfile.write(piece.translate(_INVERT) if invert else piece)
            return
        with body.open("rb") as source:
            if not invert:
                self.connection.sendfile(source, start, length)
                return
            source.seek(start)
            left = length
            while left > 0:
                piece = source.read(min(_CHUNK, left))
                if not piece:
                    return
                self.wfile.write(piece.translate(_INVERT))
                left -= len(piece)


def _answer(size: int, wanted: str | None) -> _Answer:
    """What to answer a request for a body of ``size`` bytes with this Range header."""
    whole = _Answer(status=200, start=0, length=size, headers={"Accept-Ranges": "bytes"})
    match = _RANGE.fullmatch(wanted.strip()) if wanted else None
    if match is None or match.group(1) == match.group(2) == "":
        return whole
    first, last = match.group(1), match.group(2)
    if first == "":  # a suffix: the last N bytes
        start, end = max(0, size - int(last)), size - 1
    else:
        start = int(first)
        end = min(size - 1, int(last)) if last else size - 1
    if start >= size or end < start:
        return _Answer(status=416, start=0, length=0, headers={"Content-Range": f"bytes */{size}"})
    headers = {"Accept-Ranges": "bytes", "Content-Range": f"bytes {start}-{end}/{size}"}
    return _Answer(status=206, start=start, length=end - start + 1, headers=headers)


class LocalPublisher:
    """A running publisher: what it serves, where, and what it was asked."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        host, port = server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        """The URL of ``path`` (which starts with '/') on this publisher."""
        return f"{self.base_url}{path}"

    def serve(self, path: str, data: bytes | Path, **faults: Any) -> str:
        """Serve ``data`` at ``path`` with these faults (see :class:`Faults`); returns its URL.

        Serving a path again replaces its bytes and faults.
        """
        if not path.startswith("/"):
            raise ValueError(f"a served path starts with '/': {path!r}")
        with self._server.lock:
            self._server.files[path] = Served(body=data, faults=Faults(**faults))
        return self.url(path)

    @property
    def requests(self) -> tuple[RequestLog, ...]:
        """Every request received so far, in order."""
        with self._server.lock:
            return tuple(self._server.log)

    def ranges(self, path: str) -> list[str | None]:
        """The Range header of each request for ``path``, in order (None: no Range)."""
        return [r.range for r in self.requests if r.path == path]


@contextmanager
def local_publisher() -> Iterator[LocalPublisher]:
    """A publisher listening on a free port of 127.0.0.1 until the block ends."""
    server = _Server()
    loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    loop.start()
    try:
        yield LocalPublisher(server)
    finally:
        server.closing.set()
        server.shutdown()
        loop.join()
        with server.lock:
            open_connections = list(server.connections)
        for connection in open_connections:
            with suppress(OSError):  # already closed by its handler
                connection.shutdown(socket.SHUT_RDWR)
        server.server_close()
