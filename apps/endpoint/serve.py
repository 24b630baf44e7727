"""Running the endpoint: uvicorn on 127.0.0.1 and nothing else, and the upstream read from state.

Why it is so: docs/adr/decisions/apps-endpoint.md (serve.py).
"""

from __future__ import annotations

import logging
import resource
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

import uvicorn
from attrs import evolve

from nodeau.apps.endpoint.app import (
    MAX_CONNECTIONS,
    MAX_KEEPALIVE,
    Lookup,
    Unavailable,
    Upstream,
    create_app,
)
from nodeau.apps.endpoint.limits import Limits, connections_that_fit, descriptors_needed
from nodeau.apps.endpoint.log_bound import Server, log_config
from nodeau.apps.endpoint.request_head import within
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.restarts import restart_notice, retry_after_s
from nodeau.domain.workloads import WorkloadState, holds_gpu
from nodeau.ports.state import StateStore

log = logging.getLogger("nodeau.endpoint")

HOST = "127.0.0.1"
WATCH_S = 0.5
LOOKUP_TTL_S = 1.0
LIMITS = Limits()


def endpoint_config(
    app: object, port: int, *, log_level: str = "info", limits: Limits = LIMITS
) -> uvicorn.Config:
    """uvicorn's configuration for the endpoint on ``127.0.0.1:port`` (host fixed), its
    connections within ``limits``."""
    return uvicorn.Config(
        app,  # type: ignore[arg-type]  # any ASGI app
        host=HOST,
        port=port,
        http=within(limits),
        loop="uvloop",
        ws="none",
        proxy_headers=False,  # nothing reads the client's address; no X-Forwarded-* rewriting
        lifespan="on",
        access_log=False,
        server_header=False,
        date_header=False,
        log_level=log_level,
        log_config=log_config(),
        timeout_keep_alive=limits.keep_alive_s,
    )


def fit_descriptors(limits: Limits, upstream_in_flight: int, upstream_idle: int) -> Limits:
    """``limits`` with a cap on connections this process's descriptors can hold: the soft
    limit on open files raised (up to the hard one) to what they need, else the cap lowered
    (``limits.descriptors_needed``: ``upstream_*`` are the most connections it opens)."""
    needed = descriptors_needed(limits.max_connections, upstream_in_flight, upstream_idle)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return limits
    raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    except (OSError, ValueError):
        raised = soft
    if raised >= needed:
        return limits
    fits = connections_that_fit(raised, upstream_in_flight, upstream_idle)
    log.warning(
        "%d open files are allowed (the hard limit): at most %d connections, not %d",
        raised,
        fits,
        limits.max_connections,
    )
    return evolve(limits, max_connections=fits)


def serve(
    port: int,
    upstream: Lookup,
    *,
    allowed_origins: Sequence[str] = (),
    log_level: str = "info",
    watch: Callable[[], object] | None = None,
    watch_every_s: float = WATCH_S,
    limits: Limits = LIMITS,
) -> None:
    """Serve the endpoint on 127.0.0.1:``port`` until SIGINT/SIGTERM (graceful shutdown),
    serving requests from the web origins ``allowed_origins`` besides loopback pages, and
    calling ``watch`` every ``watch_every_s`` meanwhile (on a thread of its own); its
    connections within ``limits`` (the cap lowered if its descriptors cannot hold it)."""
    app = create_app(upstream, allowed_origins=allowed_origins)
    serve_app(
        port, app, log_level=log_level, watch=watch, watch_every_s=watch_every_s, limits=limits
    )


def serve_app(
    port: int,
    app: object,
    *,
    log_level: str = "info",
    watch: Callable[[], object] | None = None,
    watch_every_s: float = WATCH_S,
    limits: Limits = LIMITS,
) -> None:
    """Serve ``app`` (the endpoint's, or the gateway's) as ``serve`` says."""
    config = endpoint_config(app, port, log_level=log_level, limits=limits)
    config.http = within(fit_descriptors(limits, MAX_CONNECTIONS, MAX_KEEPALIVE))
    stop = threading.Event()
    watcher = None
    if watch is not None:
        watcher = threading.Thread(
            target=watching, args=(watch, watch_every_s, stop), name="supervisor", daemon=True
        )
        watcher.start()
    try:
        Server(config).run()
    finally:
        stop.set()
        if watcher is not None:
            watcher.join(timeout=watch_every_s * 2)  # a restart under way does not hold us


def watching(watch: Callable[[], object], every_s: float, stop: threading.Event) -> None:
    """Call ``watch`` now and every ``every_s`` until ``stop`` is set; a failure is logged."""
    while True:
        try:
            watch()
        except Exception:
            log.exception("supervising the model server failed; looking again")
        if stop.wait(every_s):
            return


def upstream_from_state(
    store: StateStore, name: str, clock: Callable[[], datetime] | None = None
) -> Callable[[], Upstream | Unavailable | None]:
    """Where workload ``name``'s model server is, read from the state on each call (when
    it restarts: what happened and when to come back, by ``clock``)."""

    def lookup() -> Upstream | Unavailable | None:
        record = store.snapshot().named(name)
        return None if record is None else upstream_of(record, clock)

    return lookup


def upstream_of(
    record: WorkloadRecord, clock: Callable[[], datetime] | None = None
) -> Upstream | Unavailable | None:
    """Where a workload's model server is by its record: None when it holds no card or
    has no server recorded; ``Unavailable`` while it restarts."""
    w = record.workload
    if not holds_gpu(w.state):
        return None
    if w.state is WorkloadState.RESTARTING:
        now = clock() if clock is not None else w.since
        return Unavailable(
            message=restart_notice(w),
            retry_after_s=retry_after_s(w, now),
            model_server=w.state.value,
        )
    if record.server is None:
        return None
    return Upstream(
        base_url=record.server.base_url,
        task=record.config.task,
        model_name=w.name,
        started_at=record.server.started_at,
        api_key=record.server.api_key,
        names=(w.model, *w.names),
        artifact_id=w.artifact_id,
    )


class CachedLookup:
    """A lookup remembered for ``ttl_s`` seconds (its None too; not its exceptions), for
    callers on one thread (the endpoint's event loop); ``forget`` may come from another."""

    def __init__(
        self,
        lookup: Lookup,
        ttl_s: float = LOOKUP_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._ttl_s = ttl_s
        self._clock = clock
        self._value: Upstream | Unavailable | None = None
        self._until = float("-inf")
        self._forgotten = 0  # how many times ``forget`` was called

    def __call__(self) -> Upstream | Unavailable | None:
        now = self._clock()
        if now < self._until:
            return self._value
        forgotten = self._forgotten
        value = self._lookup()
        if forgotten == self._forgotten:  # else it may predate the change: not kept
            self._value, self._until = value, now + self._ttl_s
        return value

    def forget(self) -> None:
        """Look again at the next call (the state has just changed)."""
        self._forgotten += 1
        self._until = float("-inf")
