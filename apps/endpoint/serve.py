"""Running the endpoint: uvicorn on 127.0.0.1 and nothing else, and the upstream read from state.

Decisions:

* The host is ``HOST`` and no parameter, setting or flag can change it: the endpoint binds
  loopback only, by construction (concepts: "that is not a setting"). Which web origins it
  serves besides loopback pages is the one thing set per endpoint (``--allow-origin``;
  ``callers`` has the rules).
* uvicorn runs on uvloop with httptools (``request_head.BoundedHeadProtocol``: a request's
  head is bounded), both named explicitly, so the endpoint behaves the same whatever else is
  installed: with h11 and asyncio's own loop, the server's share of the endpoint's CPU per
  request was about three times as large (bench/proxy.py). WebSockets are off (no route
  takes them). Its own Server and Date headers are off (the upstream's are relayed), and so
  is the access log (one line per request would grow the log without bound).
* The model server is found through the state store, cached for ``LOOKUP_TTL_S`` (1 s) so
  a request does not open SQLite; a model server restarted on a new port is found within
  that second, without restarting the endpoint. A workload that is gone, finished or has no
  recorded server has no upstream (503). A failure to read the state is not cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import uvicorn

from nodeau.apps.endpoint.app import Upstream, create_app
from nodeau.apps.endpoint.request_head import BoundedHeadProtocol
from nodeau.domain.workloads import holds_gpu
from nodeau.ports.state import StateStore

HOST = "127.0.0.1"
LOOKUP_TTL_S = 1.0
KEEP_ALIVE_S = 75  # longer than common clients' idle pools, so they rarely meet a closed socket


def endpoint_config(app: object, port: int, *, log_level: str = "info") -> uvicorn.Config:
    """uvicorn's configuration for the endpoint on ``127.0.0.1:port`` (host fixed)."""
    return uvicorn.Config(
        app,  # type: ignore[arg-type]  # any ASGI app
        host=HOST,
        port=port,
        http=BoundedHeadProtocol,
        loop="uvloop",
        ws="none",
        proxy_headers=False,  # nothing reads the client's address; no X-Forwarded-* rewriting
        lifespan="on",
        access_log=False,
        server_header=False,
        date_header=False,
        log_level=log_level,
        timeout_keep_alive=KEEP_ALIVE_S,
    )


def serve(
    port: int,
    upstream: Callable[[], Upstream | None],
    *,
    allowed_origins: Sequence[str] = (),
    log_level: str = "info",
) -> None:
    """Serve the endpoint on 127.0.0.1:``port`` until SIGINT/SIGTERM (graceful shutdown),
    serving requests from the web origins ``allowed_origins`` besides loopback pages."""
    app = create_app(upstream, allowed_origins=allowed_origins)
    uvicorn.Server(endpoint_config(app, port, log_level=log_level)).run()


def upstream_from_state(store: StateStore, name: str) -> Callable[[], Upstream | None]:
    """Where workload ``name``'s model server is, read from the state on each call."""

    def lookup() -> Upstream | None:
        record = store.snapshot().named(name)
        if record is None or record.server is None or not holds_gpu(record.workload.state):
            return None
        return Upstream(
            base_url=record.server.base_url,
            task=record.config.task,
            model_name=name,
            started_at=record.server.started_at,
        )

    return lookup


class CachedLookup:
    """A lookup remembered for ``ttl_s`` seconds (its None too; not its exceptions), for
    callers on one thread (the endpoint's event loop)."""

    def __init__(
        self,
        lookup: Callable[[], Upstream | None],
        ttl_s: float = LOOKUP_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._ttl_s = ttl_s
        self._clock = clock
        self._value: Upstream | None = None
        self._until = float("-inf")

    def __call__(self) -> Upstream | None:
        now = self._clock()
        if now < self._until:
            return self._value
        value = self._lookup()
        self._value, self._until = value, now + self._ttl_s
        return value
