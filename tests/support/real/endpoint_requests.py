"""One request to the endpoint, written byte for byte on a raw socket, and its answer.

``send`` writes the request as given (plus its Content-Length and ``Connection: close``)
and reads until the endpoint closes; an ``Answer`` says its status, headers and body and
whether a page of a given origin may read it.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from attrs import frozen

from tests.support.real.endpoint import BOUND_S, read_until_closed
from tests.support.real.upstream import MinimalUpstream

CHAT = "/v1/chat/completions"


@frozen
class Served:
    upstream: MinimalUpstream
    port: int


@frozen
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]  # names in lower case
    body: bytes

    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = json.loads(self.body)["error"]
        return error

    def cors_headers(self) -> list[str]:
        return [name for name, _ in self.headers if name.startswith("access-control-")]

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def readable_by(self, origin: str) -> bool:
        """Whether a page of ``origin`` may read this answer: its origin echoed, once, and
        nothing granted beyond (no ``*``, no credentials)."""
        return (
            self.header("access-control-allow-origin") == [origin]
            and self.header("access-control-allow-credentials") == []
            and "Origin" in ", ".join(self.header("vary"))
        )


def send(
    port: int,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes = b"",
    version: str = "HTTP/1.1",
) -> Answer:
    """One request, written as given (plus its Content-Length and ``Connection: close``),
    on a fresh connection; the answer read until the endpoint closes it."""
    lines = [f"{method} {path} {version}", *(f"{name}: {value}" for name, value in headers)]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        received = read_until_closed(sock)
    head, _, content = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    pairs = tuple(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in header_lines)
    )
    return Answer(status=int(status_line.split()[1]), headers=pairs, body=content)
