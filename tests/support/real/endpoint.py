"""The endpoint under real uvicorn on 127.0.0.1, for the integration and end-to-end tests.

``running_endpoint`` serves the endpoint app (configured as ``serve`` configures it) in
front of whatever its ``Target`` answers; ``raw_exchange`` and ``read_until_closed`` speak
raw HTTP to it; ``record_workload`` puts a workload in a state file for the endpoint process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai
import uvicorn
from attrs import evolve

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.endpoint.app import Lookup, Unavailable, Upstream, UpstreamConnections, create_app
from nodeau.apps.endpoint.serve import endpoint_config
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import RunningServer
from tests.support.builders.admissions import decider, fleet_of
from tests.support.real.upstream import bound_port, serving

ROOT = Path(__file__).resolve().parents[3]
BOUND_S = 15.0
MODEL = "tiny"


class Target:
    """The endpoint's ``upstream`` callable; a test changes what it answers."""

    def __init__(self, upstream: Upstream | Unavailable | None = None) -> None:
        self.upstream = upstream
        self.error: Exception | None = None

    def __call__(self) -> Upstream | Unavailable | None:
        if self.error is not None:
            raise self.error
        return self.upstream


def upstream_at(base_url: str, task: Task = Task.CHAT) -> Upstream:
    return Upstream(base_url=base_url, task=task, model_name=MODEL)


@contextmanager
def running_endpoint(
    target: Lookup,
    connections: UpstreamConnections | None = None,
    allowed_origins: Sequence[str] = (),
) -> Iterator[str]:
    """The endpoint app under uvicorn, configured as ``serve`` configures it, on a free
    loopback port; yields its base URL."""
    app = create_app(target, connections=connections, allowed_origins=allowed_origins)
    server = uvicorn.Server(endpoint_config(app, 0, log_level="warning"))
    with serving(server):
        yield f"http://127.0.0.1:{bound_port(server)}"


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=BOUND_S)


def still_serves(url: str) -> None:
    response = httpx.get(f"{url}/health", timeout=BOUND_S)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def raw_exchange(url: str, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
        with suppress(OSError):  # it may close before reading all; its answer is still there
            sock.sendall(data)
        return read_until_closed(sock)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends on ``sock`` until it closes the connection."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass  # closed with our bytes unread: what it sent before is what counts
    return received


def wait_until_answering(url: str, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the endpoint exited with {process.returncode}")
        try:
            httpx.get(f"{url}/health", timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"nothing answered at {url} within {BOUND_S} s")


def record_workload(state: Path, name: str, base_url: str) -> SqliteStateStore:
    """A workload admitted in the state at ``state``, its model server at ``base_url``."""
    store = SqliteStateStore(state, clock=lambda: datetime.now(UTC))
    store.admit(name, decider(name, fleet_of(1), datetime.now(UTC))).unwrap()
    point_at(store, name, base_url)
    return store


def point_at(store: SqliteStateStore, name: str, base_url: str) -> None:
    port = int(base_url.rsplit(":", 1)[1])
    server = RunningServer(
        pid=os.getpid(), port=port, started_at=datetime.now(UTC), command=("upstream",)
    )
    store.update(name, lambda r: evolve(r, server=server))
