"""The endpoint's HTTP/1.1 server protocol: uvicorn's httptools protocol, with a bound on the
size of a request's head.

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
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

MAX_HEAD_BYTES = 16 * 1024


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

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0
