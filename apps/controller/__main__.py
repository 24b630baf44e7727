"""``python -m nodeau.apps.controller``: the fleet controller, one process per replica.

Why it is so: docs/adr/decisions/apps-controller.md (__main__.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

from nodeau.adapters.kube.client import connect
from nodeau.adapters.kube.lease import KubeLeaderLease, field_manager
from nodeau.adapters.kube.pods import NODEAU_IMAGE, PodImages
from nodeau.adapters.kube.resources import CUDA_SERVER_IMAGE, SERVER_IMAGE
from nodeau.apps.controller.bootstrap import DEFAULT_WORKERS, kube_controller
from nodeau.apps.controller.leadership import Leadership, serve
from nodeau.apps.controller.loop import Controller
from nodeau.domain.leadership import (
    DEFAULT_DURATION_S,
    DEFAULT_RENEW_DEADLINE_S,
    DEFAULT_RETRY_PERIOD_S,
    LeaseTerms,
    TermsError,
)
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
    p.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help="objects of a batch reconciled at once; each still decides in the batch's "
        f"order (default {DEFAULT_WORKERS})",
    )
    p.add_argument(
        "--server-image",
        default=SERVER_IMAGE,
        help=f"the model server's image for simulated cards and the CPU, entrypoint "
        f"llama-server (default {SERVER_IMAGE})",
    )
    p.add_argument(
        "--cuda-server-image",
        default=CUDA_SERVER_IMAGE,
        help="the model server's image for real NVIDIA cards, built with CUDA (default "
        f"{CUDA_SERVER_IMAGE}; an empty value: none, so no real card is placed on)",
    )
    p.add_argument(
        "--cuda-runtime-class",
        default=None,
        help="the RuntimeClass of a model server's Pod on a real card (default: the cluster's "
        "default runtime, which must then be NVIDIA's)",
    )
    p.add_argument(
        "--worker-image",
        default=NODEAU_IMAGE,
        help=f"Nodeau's image, for a batch job's worker (default {NODEAU_IMAGE})",
    )
    for flag, default, what in (
        ("--lease-duration", DEFAULT_DURATION_S, "how long a standby waits on a silent leader"),
        ("--renew-deadline", DEFAULT_RENEW_DEADLINE_S, "how long a leader acts unrenewed"),
        ("--retry-period", DEFAULT_RETRY_PERIOD_S, "how often the Lease is tried"),
    ):
        p.add_argument(flag, type=float, default=default, help=f"seconds: {what} "
                       f"(default {default:g})")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.resync <= 0:
        print("--resync must be a positive number of seconds", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("--workers must be a whole number of at least 1", file=sys.stderr)
        return 2
    try:
        terms = LeaseTerms(
            duration_s=args.lease_duration,
            renew_deadline_s=args.renew_deadline,
            retry_period_s=args.retry_period,
        )
        field_manager(args.identity)
        connection = connect(args.kubeconfig, args.context, os.environ)
    except (NodeauError, TermsError) as exc:
        line = exc.one_line() if isinstance(exc, NodeauError) else str(exc)
        print(f"nodeau controller: {line}", file=sys.stderr)
        return 2
    leadership = Leadership(
        KubeLeaderLease(connection.api), identity=args.identity, terms=terms, clock=utc_now,
        log=log,
    )  # fmt: skip

    def controller() -> Controller:
        return kube_controller(
            connection.api, clock=utc_now, identity=args.identity, log=log,
            fence=leadership.fence,
            images=PodImages(
                server=args.server_image,
                cuda_server=args.cuda_server_image or None,
                nodeau=args.worker_image,
                cuda_runtime_class=args.cuda_runtime_class or None,
            ),
            workers=args.workers,
            # elected: no other controller writes for longer than the renew deadline
            sole_writer_for=timedelta(seconds=terms.renew_deadline_s),
        )  # fmt: skip

    if args.once:
        return once(leadership, controller)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log(f"controller {args.identity} watching {connection.server}")
    try:
        serve(leadership, controller, args.resync, stop, log)
    except NodeauError as exc:
        print(f"nodeau controller: {exc.one_line()}", file=sys.stderr)
        return 1
    log(f"controller {args.identity} stopped")
    return 0


def once(leadership: Leadership, controller: Callable[[], Controller]) -> int:
    """One pass if this controller can take the Lease, then the Lease let go."""
    try:
        if not leadership.attempt():
            holder = leadership.holder()
            print(f"nodeau controller: {holder} leads; --once did nothing", file=sys.stderr)
            return 1
        controller().resync()
    except NodeauError as exc:
        print(f"nodeau controller: {exc.one_line()}", file=sys.stderr)
        return 1
    finally:
        leadership.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
