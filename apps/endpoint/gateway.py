"""``python -m nodeau.apps.endpoint.gateway --port P --state PATH | --fleet [...]``: one
loopback address for every model served on this machine (or fleet), each request routed by
its ``model`` to the workload serving it (``choice.EveryModel``), under the endpoint's rules.
``nodeau stop NAME`` takes a workload off its own endpoint and off the gateway at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from nodeau.adapters.loopback_port import listening
from nodeau.adapters.private_files import keep_private
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.adapters.user_service import GATEWAY_PORT
from nodeau.apps.endpoint.__main__ import port_arg, shared_args
from nodeau.apps.endpoint.answers import Unavailable, Upstream
from nodeau.apps.endpoint.app import proxy_app
from nodeau.apps.endpoint.choice import EveryModel, Served
from nodeau.apps.endpoint.routes import follow_routes
from nodeau.apps.endpoint.serve import LOOKUP_TTL_S, serve_app, upstream_of
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.errors import NodeauError
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
    shared_args(parser, fleet_help="every service of a fleet: follow their routes")
    args = parser.parse_args(argv)
    if args.fleet:
        return serve_fleet(args)
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


def serve_fleet(args: argparse.Namespace) -> int:
    """The gateway of a fleet: every service's route followed through the cluster's API,
    kept in memory (a request costs no call to the cluster)."""
    from nodeau.adapters.kube.client import connect
    from nodeau.adapters.kube.routes import KubeWorkloadRoutes

    try:
        connection = connect(args.kubeconfig, args.context, os.environ)
    except NodeauError as exc:
        print(f"nodeau gateway: {exc.one_line()}", file=sys.stderr)
        return 2
    stop = threading.Event()
    served = follow_routes(KubeWorkloadRoutes(connection.api), stop)
    try:
        app = proxy_app(EveryModel(served), allowed_origins=args.allowed_origins)
        serve_app(args.port, app, log_level=args.log_level)
    finally:
        stop.set()
    return 0


def utc_now() -> datetime:
    return datetime.now(UTC)


if __name__ == "__main__":
    sys.exit(main())
