"""``python -m nodeau.apps.agent``: the node agent, reporting this machine to the cluster.

Each round reads the cards (simulated ones when NODEAU_SIMULATED_GPUS is set,
chosen as the CLI chooses them) and the models verified under NODEAU_HOME,
and publishes the report in the machine's agent Lease (docs/adr/0004).

Decisions recorded here:

* A round that fails (cluster unreachable or refusing, no kubeconfig yet,
  cards unreadable) prints one line and the next round tries again: the agent
  never exits for what a later round can fix. Only settings it cannot use
  (a bad NODEAU_SIMULATED_GPUS, a model folder it cannot open) end it, with
  exit code 2. ``--once`` exits 1 when its one round failed.
* A problem is printed when it appears, not again every round while it
  lasts; "published" is printed for the first report and after a failed round.
* SIGTERM or SIGINT lets the round in progress finish, then the agent exits 0.
  It leaves its Lease in place: its renewTime going stale is how the
  controller learns the agent stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import urllib3
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.catalog_file import JsonCatalogFile
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube.client import ClusterUnreachable, Connection, api_reason, connect
from nodeau.adapters.kube.reports import ReportConflict, publish_report
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.agent.report import build_report
from nodeau.apps.settings import Settings, settings_from, utc_now
from nodeau.apps.cli.errors import SettingsError, one_line
from nodeau.apps.machine import inventory_for
from nodeau.domain.catalog import Catalog
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.models import CatalogError, ModelError, ModelStore
from nodeau.ports.registry import ArtifactRegistry

PROG = "nodeau-agent"


def _interval(text: str) -> float:
    seconds = float(text)
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text}: an interval is more than 0 and at most 3600 s")
    return seconds


def default_machine() -> str:
    """$NODE_NAME (the Pod's node, from the downward API), else this host's name."""
    return os.environ.get("NODE_NAME") or platform.node() or "localhost"


class Agent:
    """One machine's agent: its ports, its connection, what it last said."""

    def __init__(
        self,
        *,
        machine: str,
        settings: Settings,
        kubeconfig: Path | None,
        inventory: GpuInventory,
        store: ModelStore,
        registry: ArtifactRegistry,
    ) -> None:
        self.machine = machine
        self.settings = settings
        self.kubeconfig = kubeconfig
        self.inventory = inventory
        self.store = store
        self.registry = registry
        self.inspector = GgufModelInspector()
        self.summaries: dict[str, ModelSummary] = {}
        self.connection: Connection | None = None
        self.said: frozenset[str] = frozenset()  # the problems the last round printed
        self.published = False  # whether the last round published

    def catalog(self) -> tuple[Catalog, tuple[str, ...]]:
        try:
            return JsonCatalogFile(self.settings.catalog).load(), ()
        except CatalogError as exc:
            return Catalog(entries=()), (f"catalog not read, its names are left out: {exc}",)

    def round(self) -> bool:
        """Read, build and publish one report; True when it was published."""
        catalog, problems = self.catalog()
        try:
            built = build_report(
                inventory=self.inventory,
                store=self.store,
                book=self.registry.book(),
                catalog=catalog,
                inspector=self.inspector,
                now=utc_now(),
                summaries=self.summaries,
            )
        except Exception as exc:
            return self._failed(exc, one_line(exc), "cannot report")
        try:
            if self.connection is None:
                self.connection = connect(self.kubeconfig)
            publish_report(self.connection.api, built.report)
        except Exception as exc:
            return self._failed(exc, _cluster_problem(exc, self.connection), "cannot publish")
        if not self.published:
            reading = built.report.reading
            sim = " simulated" if reading.simulated else ""
            print(
                f"{PROG}: published the report of {self.machine}: {len(reading.gpus)}{sim} "
                f"GPU(s), {len(built.report.artifacts)} verified model(s)",
                file=sys.stderr,
                flush=True,
            )
        self.published = True
        self._say((*problems, *built.problems))
        return True

    def _failed(self, exc: Exception, problem: str | None, what: str) -> bool:
        if problem is None:  # a bug: its traceback is what a person needs
            raise exc
        self._say((f"{what}: {problem}",))
        self.published = False
        return False

    def _say(self, lines: tuple[str, ...]) -> None:
        """Print the lines the previous round did not print already."""
        for line in lines:
            if line not in self.said:
                print(f"{PROG}: {line}", file=sys.stderr, flush=True)
        self.said = frozenset(lines)


def _cluster_problem(exc: BaseException, connection: Connection | None) -> str | None:
    """One line for a failure to reach or write to the cluster; None for a bug."""
    where = f" at {connection.server}" if connection is not None else ""
    if isinstance(exc, ApiException):
        return f"the cluster{where} refused: {api_reason(exc)}"
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return f"the cluster{where} does not answer ({_flat(exc)})"
    if isinstance(exc, ClusterUnreachable | ReportConflict):
        return _flat(exc)
    return None


def _flat(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeau.apps.agent",
        description="Report this machine's GPUs and verified models to the cluster, every round.",
    )
    parser.add_argument("--kubeconfig", type=Path, help="as kubectl finds it when not given")
    parser.add_argument("--machine", default=None, help="default: $NODE_NAME, else the hostname")
    parser.add_argument("--interval", type=_interval, default=10.0, help="seconds between rounds")
    parser.add_argument("--once", action="store_true", help="one round, then exit")
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
        agent = Agent(
            machine=machine,
            settings=settings,
            kubeconfig=args.kubeconfig,
            inventory=inventory_for(machine, settings.simulated_gpus),
            store=FilesystemModelStore(
                settings.models_root, machine, reserve_bytes=settings.reserve_bytes, clock=utc_now
            ),
            registry=SqliteRegistry(settings.registry_path),
        )
    except (SettingsError, ModelError) as exc:
        print(f"{PROG}: {_flat(exc)}", file=sys.stderr)
        return 2
    while True:
        published = agent.round()
        if args.once:
            return 0 if published else 1
        if stop.wait(args.interval):
            print(f"{PROG}: stopped; the Lease of {machine} is left to go quiet", file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
