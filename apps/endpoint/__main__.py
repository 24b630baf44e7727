"""``python -m nodeau.apps.endpoint --workload NAME --port P --state PATH | --fleet``: one
workload's endpoint on 127.0.0.1:P (the composition root a user service runs), supervising
its model server on one machine, or following its route on a fleet.

Why it is so: docs/adr/decisions/apps-endpoint.md (__main__.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from nodeau.adapters.llama_server import LocalServerProcesses
from nodeau.adapters.private_files import keep_private
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.endpoint.routes import follow_route
from nodeau.apps.endpoint.serve import CachedLookup, serve, upstream_from_state
from nodeau.apps.serving.supervision import Supervisor
from nodeau.domain.origins import parse_origin
from nodeau.ports.errors import NodeauError
from nodeau.ports.state import StateError

LOG_FOLDER = "logs"  # beside the state database, as the CLI's settings keep it (home/logs)


def port_arg(text: str) -> int:
    port = int(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (1-65535)")
    return port


def origin_arg(text: str) -> str:
    try:
        return parse_origin(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeau.apps.endpoint",
        description="Serve one workload's OpenAI-compatible endpoint on 127.0.0.1 (only).",
    )
    parser.add_argument("--workload", required=True, help="the workload's name")
    parser.add_argument("--port", required=True, type=port_arg, help="its fixed endpoint port")
    shared_args(parser, fleet_help="the workload is on a fleet: follow its route")
    args = parser.parse_args(argv)
    keep_private(None if args.fleet else args.state.parent)  # before it writes: ADR 0021
    if args.fleet:
        return serve_fleet_workload(args)
    try:
        store = SqliteStateStore(args.state, clock=utc_now)
    except StateError as exc:
        print(f"nodeau endpoint: {exc}", file=sys.stderr)
        return 2
    lookup = CachedLookup(upstream_from_state(store, args.workload, utc_now))
    supervisor = Supervisor(
        args.workload,
        state=store,
        processes=LocalServerProcesses(os.environ),  # what a restarted server starts from
        log_dir=args.state.parent / LOG_FOLDER,
        now=utc_now,
        changed=lookup.forget,
    )
    serve(
        args.port,
        lookup,
        allowed_origins=args.allowed_origins,
        log_level=args.log_level,
        watch=supervisor.check,
    )
    return 0


def shared_args(parser: argparse.ArgumentParser, *, fleet_help: str) -> None:
    """The options an endpoint and the gateway share: where their model servers are found
    (this machine's state, or a fleet's cluster), the web origins they also serve, and how
    much they log."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--state", type=Path, help="the plane's state database")
    source.add_argument("--fleet", action="store_true", help=fleet_help)
    parser.add_argument("--kubeconfig", type=Path, help="with --fleet: the cluster's kubeconfig")
    parser.add_argument("--context", help="with --fleet: the kubeconfig context")
    parser.add_argument(
        "--allow-origin",
        dest="allowed_origins",
        action="append",
        default=[],
        type=origin_arg,
        metavar="ORIGIN",
        help="also serve pages of ORIGIN (scheme://host[:port]; repeatable), with CORS answers "
        "they can read; loopback pages are always served, other web origins refused (403)",
    )
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning"))


def serve_fleet_workload(args: argparse.Namespace) -> int:
    """The endpoint of a workload on a fleet: its route followed through the cluster's API."""
    from nodeau.adapters.kube.client import connect
    from nodeau.adapters.kube.routes import KubeWorkloadRoutes

    try:
        connection = connect(args.kubeconfig, args.context, os.environ)
    except NodeauError as exc:
        print(f"nodeau endpoint: {exc.one_line()}", file=sys.stderr)
        return 2
    stop = threading.Event()
    lookup = follow_route(KubeWorkloadRoutes(connection.api), args.workload, stop)
    try:
        serve(
            args.port,
            lookup,
            allowed_origins=args.allowed_origins,
            log_level=args.log_level,
        )
    finally:
        stop.set()
    return 0


def utc_now() -> datetime:
    return datetime.now(UTC)


if __name__ == "__main__":
    sys.exit(main())
