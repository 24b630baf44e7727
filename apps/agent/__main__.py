"""``python -m nodeau.apps.agent``: the node agent, reporting this machine to the cluster.

Why it is so: docs/adr/decisions/apps-agent.md (__main__.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from attrs import evolve

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.kube.client import connect
from nodeau.adapters.kube.copies import KubeModelCopies
from nodeau.adapters.kube.reports import KubeMachineReports
from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.adapters.pod_cgroup import ProcCgroupPods
from nodeau.adapters.server_abilities import answer_file
from nodeau.adapters.this_machine import inventory_for
from nodeau.apps.agent.agent import PROG, Agent, Link
from nodeau.apps.agent.copies import CopyWorker
from nodeau.apps.agent.memory import PodMemoryWatch
from nodeau.apps.models import bootstrap as model_services
from nodeau.apps.settings import settings_from, utc_now
from nodeau.domain.model_server import ServerAbilities
from nodeau.ports.errors import NodeauError
from nodeau.ports.hardware import GpuInventory


def _interval(text: str) -> float:
    seconds = float(text)
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text}: an interval is more than 0 and at most 3600 s")
    return seconds


def default_machine() -> str:
    """$NODE_NAME (the Pod's node, from the downward API), else this host's name."""
    return os.environ.get("NODE_NAME") or platform.node() or "localhost"


def kube_link(kubeconfig: Path | None) -> Link:
    """Connect as kubectl would (or with ``kubeconfig``): the server, its reports and its
    copy requests."""
    connection = connect(kubeconfig, None, os.environ)
    return Link(
        server=connection.server,
        reports=KubeMachineReports(connection.api),
        copies=KubeModelCopies(connection.api),
    )


def pod_memory_watch(inventory: GpuInventory) -> PodMemoryWatch | None:
    """The memory watch of a machine whose cards NVML reads; None for simulated cards,
    which hold nothing of their own."""
    if not isinstance(inventory, NvmlGpuInventory):
        return None
    return PodMemoryWatch(processes=inventory, pods=ProcCgroupPods(), clock=utc_now)


def server_answer(args: argparse.Namespace) -> Callable[[], ServerAbilities | None]:
    """Read the probe's answer (``--server-answer``) each round, as ``--server-image``'s."""
    path, image = Path(args.server_answer), str(args.server_image)
    return lambda: answer_file(path, image)


def say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeau.apps.agent",
        description="Report this machine's GPUs and verified models to the cluster, every round.",
    )
    parser.add_argument("--kubeconfig", type=Path, help="as kubectl finds it when not given")
    parser.add_argument("--machine", default=None, help="default: $NODE_NAME, else the hostname")
    parser.add_argument("--interval", type=_interval, default=10.0, help="seconds between rounds")
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    parser.add_argument(
        "--server-answer",
        type=Path,
        default=None,
        help="the file where the model server's image wrote its --version and --list-devices "
        "answer on this machine (deploy/40-agent.yaml's server-probe); the report carries it",
    )
    parser.add_argument(
        "--server-image", default="the model server", help="that image's name, as reported"
    )
    args = parser.parse_args(argv)
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retry warnings are not our lines

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    machine = args.machine or default_machine()
    settings = settings_from(os.environ)
    try:
        models = model_services.build(evolve(settings, machine=machine))
        inventory = inventory_for(machine, settings.simulated_gpus)
        memory = pod_memory_watch(inventory)
        agent = Agent(
            machine=machine,
            connect=lambda: kube_link(args.kubeconfig),
            inventory=inventory,
            store=models.store,
            registry=models.registry,
            catalog=JsonCatalogFile(settings.catalog),
            inspector=models.inspector,
            clock=utc_now,
            copies=CopyWorker(
                machine=machine,
                store=models.store,
                registry=models.registry,
                publisher=models.publisher(),
                url_for=models.url_for,
                say=say,
            ),
            memory=memory,
            server=None if args.server_answer is None else server_answer(args),
        )
    except NodeauError as exc:
        print(f"{PROG}: {exc.one_line()}", file=sys.stderr)
        return 2
    if memory is not None:
        memory.start()
    while True:
        published = agent.round()
        if args.once:
            agent.close()
            return 0 if published else 1
        if stop.wait(args.interval):
            agent.close()
            print(f"{PROG}: stopped; the Lease of {machine} is left to go quiet", file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
