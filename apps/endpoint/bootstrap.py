"""The gateway's composition root: its arguments, this machine's state or the fleet's
routes, and the proxy it serves (``python -m nodeau.apps.endpoint.gateway`` runs it).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from nodeau.adapters.loopback_port import listening
from nodeau.adapters.private_files import keep_private
from nodeau.adapters.service_specs import GATEWAY_PORT
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.endpoint.__main__ import port_arg, shared_args
from nodeau.apps.endpoint.app import proxy_app
from nodeau.apps.endpoint.choice import EveryModel
from nodeau.apps.endpoint.gateway import CachedServed, served_from_state
from nodeau.apps.endpoint.routes import follow_routes
from nodeau.apps.endpoint.serve import serve_app
from nodeau.ports.errors import NodeauError
from nodeau.ports.state import StateError


def gateway_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeau.apps.endpoint.gateway",
        description="Serve every model of this machine on one address, 127.0.0.1 (only).",
    )
    parser.add_argument("--port", type=port_arg, default=GATEWAY_PORT, help="its port")
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
    choice = EveryModel(CachedServed(served_from_state(store, utc_now, listening)))
    app = proxy_app(choice, allowed_origins=args.allowed_origins)
    serve_app(args.port, app, log_level=args.log_level)
    return 0


def serve_fleet(args: argparse.Namespace) -> int:
    """The gateway of a fleet: every service's route followed through the cluster's API,
    kept in memory (a request costs no call to the cluster)."""
    from nodeau.adapters.kube.client import connect  # only a fleet's gateway loads the client
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
