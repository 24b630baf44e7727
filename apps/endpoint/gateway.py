"""``python -m nodeau.apps.endpoint.gateway --port P --state PATH [--allow-origin ORIGIN]``:
one loopback address for every model served on this machine, each request routed by its
``model`` to the workload serving it (``choice.EveryModel``), under the endpoint's rules.
A workload is routed to while its own endpoint listens: ``nodeau stop NAME`` stops both.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from nodeau.adapters.loopback_port import listening
from nodeau.adapters.private_files import keep_private
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.adapters.user_service import GATEWAY_PORT
from nodeau.apps.endpoint.__main__ import origin_arg, port_arg
from nodeau.apps.endpoint.answers import Unavailable, Upstream
from nodeau.apps.endpoint.app import proxy_app
from nodeau.apps.endpoint.choice import EveryModel, Served
from nodeau.apps.endpoint.serve import LOOKUP_TTL_S, serve_app, upstream_of
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import StateError, StateStore

DEFAULT_PORT = GATEWAY_PORT


def served_from_state(
    store: StateStore,
    clock: Callable[[], datetime],
    endpoint_listens: Callable[[int], bool] = listening,
) -> Callable[[], Served]:
    """Every service of the state whose endpoint listens: running, or restarting."""

    def served() -> Served:
        running: list[Upstream] = []
        waiting: dict[str, Unavailable] = {}
        for record in store.snapshot().workloads:
            port = record.endpoint_port
            if record.workload.kind is not WorkloadKind.SERVICE or not port:
                continue
            found = upstream_of(record, clock)
            if found is None or not endpoint_listens(port):
                continue
            if isinstance(found, Unavailable):
                waiting[record.workload.name] = found
            else:
                running.append(found)
        return Served(running=tuple(running), waiting=waiting)

    return served


class CachedServed:
    """``served()`` remembered for ``ttl_s`` seconds (not its exceptions)."""

    def __init__(self, served: Callable[[], Served], ttl_s: float = LOOKUP_TTL_S) -> None:
        self._served = served
        self._ttl_s = ttl_s
        self._value = Served()
        self._until = float("-inf")

    def __call__(self) -> Served:
        now = time.monotonic()
        if now >= self._until:
            self._value, self._until = self._served(), now + self._ttl_s
        return self._value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeau.apps.endpoint.gateway",
        description="Serve every model of this machine on one address, 127.0.0.1 (only).",
    )
    parser.add_argument("--port", type=port_arg, default=DEFAULT_PORT, help="its port")
    parser.add_argument("--state", type=Path, required=True, help="the plane's state database")
    parser.add_argument(
        "--allow-origin",
        dest="allowed_origins",
        action="append",
        default=[],
        type=origin_arg,
        metavar="ORIGIN",
        help="also serve pages of ORIGIN (scheme://host[:port]; repeatable), as an endpoint",
    )
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning"))
    args = parser.parse_args(argv)
    keep_private(args.state.parent)
    try:
        store = SqliteStateStore(args.state, clock=utc_now)
    except StateError as exc:
        print(f"nodeau gateway: {exc}", file=sys.stderr)
        return 2
    choice = EveryModel(CachedServed(served_from_state(store, utc_now)))
    app = proxy_app(choice, allowed_origins=args.allowed_origins)
    serve_app(args.port, app, log_level=args.log_level)
    return 0


def utc_now() -> datetime:
    return datetime.now(UTC)


if __name__ == "__main__":
    sys.exit(main())
