"""The endpoint within connection limits, and connections held open against it.

``endpoint`` serves a chat workload's endpoint with the limits given (no request reaches
its model server); ``opened`` holds connections that send nothing or half a head;
``eventually`` waits, bounded, for what the endpoint should come to.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import httpx
import uvicorn

from nodeau.apps.endpoint.app import create_app
from nodeau.apps.endpoint.limits import Limits
from nodeau.apps.endpoint.serve import endpoint_config
from tests.support.real.endpoint import Target, upstream_at
from tests.support.real.upstream import bound_port, serving

BOUND_S = 10.0


@contextmanager
def endpoint(limits: Limits) -> Iterator[tuple[uvicorn.Server, int]]:
    """The endpoint of a chat workload within ``limits``, as ``serve`` configures it (no
    request here reaches its model server); yields its server and port."""
    app = create_app(Target(upstream_at("http://127.0.0.1:9")))
    server = uvicorn.Server(endpoint_config(app, 0, log_level="error", limits=limits))
    with serving(server):
        yield server, bound_port(server)


def health(port: int) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}/health", timeout=BOUND_S, trust_env=False)


def eventually(what: str, holds: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not holds():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def opened(stack: ExitStack, port: int, count: int, send: bytes = b"") -> list[socket.socket]:
    """``count`` connections to ``port``, each sending ``send`` (nothing, or half a head)."""
    socks = []
    for _ in range(count):
        sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=BOUND_S))
        if send:
            sock.sendall(send)
        socks.append(sock)
    return socks
