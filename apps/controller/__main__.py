"""``python -m nodeau.apps.controller``: the fleet controller, one process per replica.

Several may run against one cluster: the ledger's resourceVersion makes their
admissions safe, every other step is idempotent. SIGTERM or SIGINT ends it
after the reconcile in progress; a cluster it cannot reach is one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from nodeau.adapters.kube.client import connect
from nodeau.apps.controller.bootstrap import kube_controller
from nodeau.ports.errors import NodeauError

DEFAULT_RESYNC_S = 10.0


def utc_now() -> datetime:
    return datetime.now(UTC)


def log(line: str) -> None:
    print(f"{utc_now():%H:%M:%S} {line}", flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nodeau.apps.controller",
        description="Nodeau's fleet controller: admission, placement, Pods and machine health.",
    )
    p.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: as kubectl finds it)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="who decided, as status.decidedBy and Events show it (default: hostname-pid)",
    )
    p.add_argument(
        "--resync",
        type=float,
        default=DEFAULT_RESYNC_S,
        help=f"seconds between health assessments and full passes (default {DEFAULT_RESYNC_S:g})",
    )
    p.add_argument("--once", action="store_true", help="one pass over everything, then exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.resync <= 0:
        print("--resync must be a positive number of seconds", file=sys.stderr)
        return 2
    try:
        connection = connect(args.kubeconfig, args.context, os.environ)
    except NodeauError as exc:
        print(f"nodeau controller: {exc.one_line()}", file=sys.stderr)
        return 2
    controller = kube_controller(connection.api, clock=utc_now, identity=args.identity, log=log)
    if args.once:
        controller.resync()
        return 0
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log(f"controller {args.identity} watching {connection.server}")
    try:
        controller.run(args.resync, stop)
    except NodeauError as exc:
        print(f"nodeau controller: {exc.one_line()}", file=sys.stderr)
        return 1
    log(f"controller {args.identity} stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
