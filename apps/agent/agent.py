"""One machine's agent: each round, build its report from its ports and publish it.

Why it is so: docs/adr/decisions/apps-agent.md (agent.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime

from attrs import evolve, frozen

from nodeau.apps.agent.copies import CopyWorker
from nodeau.apps.agent.memory import PodMemoryWatch
from nodeau.apps.machines.report import build_report
from nodeau.domain.catalog import Catalog
from nodeau.domain.model_info import ModelSummary
from nodeau.domain.model_server import ServerAbilities
from nodeau.ports.cluster import (
    ClusterError,
    ClusterRefused,
    MachineReports,
    ModelCopies,
    NoAnswer,
)
from nodeau.ports.errors import NodeauError
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.models import CatalogError, CatalogSource, ModelInspector, ModelStore
from nodeau.ports.registry import ArtifactRegistry

PROG = "nodeau-agent"
CATALOG_UNREAD = "catalog not read, its names are left out: "


@frozen(kw_only=True)
class Link:
    """The cluster: its address (for messages), its reports and its copy requests."""

    server: str
    reports: MachineReports
    copies: ModelCopies | None = None


class Agent:
    """One machine's agent: its ports, its link to the cluster, what it last said."""

    def __init__(
        self,
        *,
        machine: str,
        connect: Callable[[], Link],
        inventory: GpuInventory,
        store: ModelStore,
        registry: ArtifactRegistry,
        catalog: CatalogSource,
        inspector: ModelInspector,
        clock: Callable[[], datetime],
        copies: CopyWorker | None = None,
        memory: PodMemoryWatch | None = None,
        server: Callable[[], ServerAbilities | None] | None = None,
    ) -> None:
        """``server``: what this machine's model server says it can use, read each round
        (the probe's answer); None: not known here, and the report says nothing of it."""
        self.machine = machine
        self.memory = memory
        self.server = server
        self.copies = copies
        self.connect = connect
        self.inventory = inventory
        self.store = store
        self.registry = registry
        self.catalog_source = catalog
        self.inspector = inspector
        self.clock = clock
        self.summaries: dict[str, ModelSummary] = {}
        self.link: Link | None = None
        self.said: frozenset[str] = frozenset()  # the problems the last round printed
        self.published = False  # whether the last round published

    def catalog(self) -> tuple[Catalog, tuple[str, ...]]:
        try:
            return self.catalog_source.load(), ()
        except CatalogError as exc:
            return Catalog(entries=()), (f"{CATALOG_UNREAD}{exc}",)

    def round(self) -> bool:
        """Read, build and publish one report; True when it was published."""
        catalog, problems = self.catalog()
        try:
            if self.link is None:
                self.link = self.connect()
        except ClusterError as exc:
            return self._failed(f"cannot publish: {cluster_problem(exc, None)}")
        link = self.link
        problems += self._take_requests(link, catalog, problems)
        progress = () if self.copies is None else self.copies.progress()
        pods = () if self.memory is None else self.memory.memory()
        unread = None if self.memory is None else self.memory.problem()
        problems += () if unread is None else (unread,)
        try:
            built = build_report(
                inventory=self.inventory,
                store=self.store,
                book=self.registry.book(),
                catalog=catalog,
                inspector=self.inspector,
                now=self.clock(),
                summaries=self.summaries,
            )
        except NodeauError as exc:
            return self._failed(f"cannot report: {exc.one_line()}")
        held = {a.id for a in built.report.artifacts}
        server, unasked = self._server()
        problems += unasked
        report = evolve(
            built.report,
            copies=tuple(p for p in progress if p.artifact not in held),
            pods=pods,
            server=server,
        )
        try:
            link.reports.publish(report)
        except ClusterError as exc:
            return self._failed(f"cannot publish: {cluster_problem(exc, link.server)}")
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

    def _server(self) -> tuple[ServerAbilities | None, tuple[str, ...]]:
        """What the model server says it can use, and a line when that cannot be read."""
        if self.server is None:
            return None, ()
        try:
            said = self.server()
        except NodeauError as exc:
            return None, (f"the model server's answer is left out: {exc.one_line()}",)
        if said is None:
            return None, ("the model server has not answered yet (its probe wrote nothing)",)
        return said, ()

    def _take_requests(
        self, link: Link, catalog: Catalog, problems: tuple[str, ...]
    ) -> tuple[str, ...]:
        """Hand this round's copy requests to the worker; a line when they cannot be read."""
        if self.copies is None or link.copies is None:
            return ()
        try:
            requests = link.copies.requests()
        except ClusterError as exc:
            return (f"cannot read the copy requests: {cluster_problem(exc, link.server)}",)
        unread = next((p for p in problems if p.startswith(CATALOG_UNREAD)), None)
        why = None
        if unread is not None:
            why = (
                "this machine's catalog was not read, so it fetches nothing: "
                f"{unread.removeprefix(CATALOG_UNREAD)}"
            )
        self.copies.want(requests, catalog, why)
        return ()

    def close(self) -> None:
        """Stop the copy in progress (what arrived is kept for a resume) and the memory
        watch."""
        if self.copies is not None:
            self.copies.stop()
        if self.memory is not None:
            self.memory.stop()

    def _failed(self, problem: str) -> bool:
        self._say((problem,))
        self.published = False
        return False

    def _say(self, lines: tuple[str, ...]) -> None:
        """Print the lines the previous round did not print already."""
        for line in lines:
            if line not in self.said:
                print(f"{PROG}: {line}", file=sys.stderr, flush=True)
        self.said = frozenset(lines)


def cluster_problem(exc: ClusterError, server: str | None) -> str:
    """One line for a failure to reach or write to the cluster at ``server``."""
    where = f" at {server}" if server is not None else ""
    if isinstance(exc, NoAnswer):
        return f"the cluster{where} does not answer ({exc.reason})"
    if isinstance(exc, ClusterRefused):
        return f"the cluster{where} refused: {exc.status} {exc.message}"
    return exc.one_line()
