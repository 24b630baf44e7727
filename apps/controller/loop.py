"""The controller's loop: watches bring keys, a periodic resync brings everything and health.

Decisions recorded here:

* Keys that arrive together are reconciled as one batch over one reading of
  the fleet (reports, marks, health): a burst of 500 new objects costs one
  reading, not 500. A batch is sorted, so two controllers meet objects in the
  same order.
* Every ``resync`` seconds: health first (signals, assessment, the ConfigMap,
  held workloads), then every object, so a missed watch event costs at most
  one resync.
* A failure of one object's reconcile (a conflict lost, the API server
  restarting) is one log line; the loop goes on and the next event or resync
  tries again. ``--once`` is one resync, then the end.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from nodeau.adapters.kube.client import ClusterUnreachable, Conflict
from nodeau.adapters.kube.health_store import read_health, write_health
from nodeau.adapters.kube.marks import read_marks
from nodeau.adapters.kube.objects import list_objects
from nodeau.adapters.kube.reports import read_reports, read_signals
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.watch import Key, start_watches
from nodeau.apps.controller.asks import PLURALS
from nodeau.apps.controller.health import assess_fleet, changes, show_health
from nodeau.apps.controller.reconcile import FleetInputs, Reconciler
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import StateError

KIND_OF_PLURAL = {plural: kind for kind, plural in PLURALS.items()}
EXPECTED = (StateError, Conflict, ClusterUnreachable, OSError, ValueError)


class Controller:
    """One controller process: reconciles objects and assesses machine health."""

    def __init__(
        self,
        api: Any,
        *,
        clock: Callable[[], datetime],
        identity: str,
        log: Callable[[str], None],
    ) -> None:
        self._api = api
        self._clock = clock
        self._log = log
        self.store = KubeStateStore(api, clock=clock, identity=identity)
        self.reconciler = Reconciler(api, self.store, clock=clock, identity=identity, log=log)

    def read_fleet(self) -> FleetInputs:
        """Reports, marks and health as they are now."""
        return FleetInputs(
            reports=read_reports(self._api),
            marks=read_marks(self._api),
            health=read_health(self._api),
        )

    def assess_health(self) -> None:
        """Assess every machine, keep the result in the cluster, and show it on workloads."""
        previous = read_health(self._api)
        now = self._clock()
        health = assess_fleet(read_signals(self._api), previous, now)
        write_health(self._api, health)
        for line in changes(previous, health):
            self._log(line)
        show_health(self.store, health, now, self._log)

    def reconcile_all(self, keys: Iterable[tuple[WorkloadKind, str]]) -> None:
        """Reconcile these objects over one reading of the fleet (read when first needed)."""
        read: list[FleetInputs] = []

        def fleet() -> FleetInputs:
            if not read:
                read.append(self.read_fleet())
            return read[0]

        for kind, name in sorted(set(keys)):
            try:
                self.reconciler.reconcile(kind, name, fleet)
            except EXPECTED as exc:
                self._log(f"{PLURALS[kind]}/{name}: not reconciled this time: {one_line(exc)}")

    def resync(self) -> None:
        """Health, then every GPUService and BatchJob."""
        try:
            self.assess_health()
        except EXPECTED as exc:
            self._log(f"machine health not assessed this time: {one_line(exc)}")
        try:
            objects = list_objects(self._api)
        except EXPECTED as exc:
            self._log(f"objects not listed this time: {one_line(exc)}")
            return
        self.reconcile_all((o.kind, o.name) for o in objects)

    def run(self, resync_s: float, stop: threading.Event) -> None:
        """Watch and reconcile until ``stop`` is set."""
        keys: queue.Queue[Key] = queue.Queue()
        start_watches(self._api, keys.put, stop)
        next_resync = time.monotonic()
        while not stop.is_set():
            if time.monotonic() >= next_resync:
                self.resync()
                next_resync = time.monotonic() + resync_s
            batch = take(keys, min(resync_s, max(0.0, next_resync - time.monotonic())), stop)
            if batch:
                self.reconcile_all((KIND_OF_PLURAL[p], n) for p, n in batch)


def take(keys: queue.Queue[Key], wait_s: float, stop: threading.Event) -> set[Key]:
    """The keys waiting (waiting up to ``wait_s`` for the first), or none if ``stop`` is set."""
    deadline = time.monotonic() + wait_s
    batch: set[Key] = set()
    while not batch and not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return batch
        try:
            batch.add(keys.get(timeout=min(left, 0.5)))
        except queue.Empty:
            continue
    while True:
        try:
            batch.add(keys.get_nowait())
        except queue.Empty:
            return {k for k in batch if k[0] in KIND_OF_PLURAL}


def one_line(exc: BaseException) -> str:
    """An error as one line for the log."""
    return " ".join(str(exc).split()) or type(exc).__name__
