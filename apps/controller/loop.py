"""The controller's loop: watches bring keys, a periodic resync brings everything and health.

Why it is so: docs/adr/decisions/apps-controller.md (loop.py).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import partial

from attrs import frozen

from nodeau.apps.controller.copies import CopyKeeper
from nodeau.apps.controller.health import apply_health
from nodeau.apps.controller.reading import FleetInputs, FleetReading, proved_reader
from nodeau.apps.controller.reconcile import KIND_NAMES, Reconciler
from nodeau.apps.controller.recover import Recoverer
from nodeau.apps.controller.turns import Turn, Turns
from nodeau.apps.plans.entitlement import kept_terms
from nodeau.domain.health import Health, MachineHealth, assess_fleet, changes, next_quiet
from nodeau.domain.memory import MeasuredTable
from nodeau.domain.organisation import Spending
from nodeau.domain.plans import PlanTerms
from nodeau.domain.records import spending
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.batches import FleetBatches
from nodeau.ports.cluster import (
    ClusterError,
    EventLog,
    FleetMarks,
    HealthRecords,
    KeptEvidence,
    MachineReports,
    MeasuredPeaks,
    ModelCopies,
    ServerPods,
)
from nodeau.ports.entitlements import EntitlementVerifier, KeptEntitlement
from nodeau.ports.errors import NodeauError
from nodeau.ports.leader_lease import NotLeading
from nodeau.ports.models import CatalogSource
from nodeau.ports.organisation import OrganisationPolicy
from nodeau.ports.state import MovingStateStore
from nodeau.ports.workload_objects import WorkloadObjects, WorkloadWatch

Key = tuple[WorkloadKind, str]
# a gap longer than this between two health assessments means this controller was not
# watching (stalled, paused, cut off): six default resyncs
STALL = timedelta(seconds=60)
WAKE_LATE_S = 0.05  # how long after a due moment the controller wakes


@frozen(kw_only=True)
class ControllerPorts:
    """Everything the controller reads and writes, as ports."""

    store: MovingStateStore
    objects: WorkloadObjects
    pods: ServerPods
    reports: MachineReports
    marks: FleetMarks
    health: HealthRecords
    events: EventLog
    watch: WorkloadWatch
    copies: ModelCopies
    entitlement: KeptEntitlement  # the installed entitlement, read only
    verifier: EntitlementVerifier  # the keys this build trusts
    organisation: OrganisationPolicy
    # batch jobs' results kept in the cluster; None: a job ends only when its server does
    batches: FleetBatches | None = None
    # the peaks qualification measured on the fleet's cards; None: every figure estimated
    measured: MeasuredPeaks | None = None
    # what qualification proved, and the curated catalog: a service's task is checked
    # against them (reconcile.py); evidence None: no task is checked
    evidence: KeptEvidence | None = None
    catalog: CatalogSource | None = None


class Controller:
    """One controller process: reconciles objects and assesses machine health
    (``workers``: how many objects of a batch are reconciled at once)."""

    def __init__(
        self,
        ports: ControllerPorts,
        *,
        clock: Callable[[], datetime],
        log: Callable[[str], None],
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a controller reconciles with at least one worker, not {workers}")
        self.ports = ports
        self._workers = workers
        self.store = ports.store
        self._clock = clock
        self._log = log
        self.reconciler = Reconciler(
            store=ports.store,
            objects=ports.objects,
            pods=ports.pods,
            events=ports.events,
            clock=clock,
            log=log,
            batches=ports.batches,
        )
        self.recoverer = Recoverer(store=ports.store, objects=ports.objects, clock=clock, log=log)
        self.copies = CopyKeeper(copies=ports.copies, clock=clock, log=log)
        self._watched_at: datetime | None = None  # when this controller last assessed health
        # the next moment the fleet's health or a recovery can change without any event: a
        # fresh signal going quiet, a delay running out; ``run`` wakes for it
        self.wake_at: datetime | None = None
        self._unmeasured: str | None = None  # why the measured peaks were last not read

    def read_fleet(self) -> FleetInputs:
        """Reports, marks, health, the plan and the organisation's policy as they are now."""
        return self._inputs(self.ports.health.read())

    def _plan(self) -> PlanTerms:
        """The plan's terms new decisions use now (nothing is written to read them)."""
        kept = self.ports.entitlement.kept()
        return kept_terms(kept, self.ports.verifier, self._clock()).terms

    def _inputs(self, health: Mapping[str, MachineHealth]) -> FleetInputs:
        return FleetInputs(
            reports=self.ports.reports.read().reports,
            marks=self.ports.marks.read(),
            health=health,
            plan=kept_terms(
                self.ports.entitlement.kept(), self.ports.verifier, self._clock()
            ).terms,
            organisation=self.ports.organisation.read(),
            table=self._measurements(),
            cuda_image=self.ports.pods.serves_real_cards,
        )

    def _measurements(self) -> MeasuredTable:
        """The measured peaks decisions use now; none (every figure estimated, said once)
        when they cannot be read: an unreadable measurement never stops an admission."""
        if self.ports.measured is None:
            return MeasuredTable()
        try:
            table = self.ports.measured.measurements()
        except ClusterError as exc:
            line = f"measured peaks not read, every figure is estimated: {exc.one_line()}"
            if line != self._unmeasured:
                self._log(line)
            self._unmeasured = line
            return MeasuredTable()
        self._unmeasured = None
        return table

    def assess_health(self) -> None:
        """Assess every machine, keep the result, show it on workloads, and recover the
        services whose machine has been unreachable for their delay."""
        try:
            self._assess_health()
        finally:
            self.ports.events.flush()

    def _assess_health(self) -> None:
        previous = self.ports.health.read()
        now = self._clock()
        watching = watching_since(self._watched_at, now)
        signals = self.ports.reports.signals()
        health = assess_fleet(signals, previous, now, watching_since=watching)
        changes_at = [m for s in signals.values() if (m := next_quiet(s, now)) is not None]
        self.ports.health.write(health)
        self._watched_at = now
        for line in changes(previous, health):
            self._log(line)
        snapshot = self.store.snapshot()
        apply_health(self.store, health, now, self._log, snapshot.workloads)
        inputs = self._inputs(health)
        if any(h.state is Health.UNREACHABLE for h in health.values()):
            due = self.recoverer.recover(self.store.snapshot(), inputs)
            changes_at += [] if due is None else [due]
        self.wake_at = min(changes_at) if changes_at else None
        self.copies.keep(self.store.snapshot(), inputs)

    def spending(self) -> tuple[Spending, ...]:
        """What the workloads holding a card spend, from every object's record (listed once
        per reconcile batch, and only when a decision under a policy needs it)."""
        return spending(o.record for o in self.ports.objects.list_all() if o.record is not None)

    def reconcile_all(self, keys: Iterable[Key]) -> None:
        """Reconcile these objects over one reading of the fleet (read when first needed):
        first every admission the batch needs decided, in the batch's order, then what each
        admitted workload's record calls for; up to ``workers`` objects at once."""
        reading = FleetReading(
            self.read_fleet,
            self.ports.health.read,
            proved_reader(self.ports.evidence, self.ports.catalog),
            self.spending,
        )
        try:
            self._reconcile(sorted(set(keys)), reading)
        finally:
            self.ports.events.flush()  # the batch ends with every Event it recorded written

    def _reconcile(self, batch: list[Key], reading: FleetReading) -> None:
        if self._workers == 1 or len(batch) < 2:
            with self.ports.events.held():  # the decisions' own writes first
                decided = [self._decide_one(key, reading, None) for key in batch]
            for key in (key for key, on in zip(batch, decided, strict=True) if on):
                self._carry_out_one(key, reading)
            return
        turns = Turns(len(batch))
        with ThreadPoolExecutor(self._workers, thread_name_prefix="reconcile") as pool:
            with self.ports.events.held():  # the decisions' own writes first
                decided = self._in_pool(
                    pool,
                    [
                        partial(self._decide_one, key, reading, turns.turn(p))
                        for p, key in enumerate(batch)
                    ],
                )
            self._in_pool(
                pool,
                [
                    partial(self._carry_out_one, key, reading)
                    for key, on in zip(batch, decided, strict=True)
                    if on
                ],
            )

    @staticmethod
    def _in_pool(pool: ThreadPoolExecutor, steps: list[Callable[[], bool]]) -> list[bool]:
        """Each step's answer, the steps run by the pool's workers; the first step's end of
        term or bug is raised here once every step has run or been cancelled."""
        running = [pool.submit(step) for step in steps]
        try:
            return [done.result() for done in running]
        finally:
            for left in running:
                left.cancel()

    def _decide_one(self, key: Key, reading: FleetReading, turn: Turn | None) -> bool:
        try:
            return self._step(key, lambda: self.reconciler.decide(*key, reading, turn))
        finally:
            if turn is not None:
                turn.done()

    def _carry_out_one(self, key: Key, reading: FleetReading) -> bool:
        def step() -> bool:
            self.reconciler.carry_out(*key, reading)
            return True

        return self._step(key, step)

    def _step(self, key: Key, step: Callable[[], bool]) -> bool:
        """``step()``; False, logged, when it failed as expected (the next pass tries again)."""
        kind, name = key
        try:
            return step()
        except NodeauError as exc:
            ends_term(exc)  # a deposed leader's term is over: nothing more is tried
            self._log(f"{KIND_NAMES[kind]} {name}: not reconciled this time: {exc.one_line()}")
            return False

    def resync(self) -> None:
        """Health, then every GPUService and BatchJob (the objects and their servers each
        listed once, so the pass reads them as they are now without a read per object)."""
        try:
            self.assess_health()
        except NodeauError as exc:
            ends_term(exc)
            self._log(f"machine health not assessed this time: {exc.one_line()}")
        try:
            objects = self.ports.objects.list_all()
            self.ports.pods.read_all()
        except NodeauError as exc:
            self._log(f"objects not listed this time: {exc.one_line()}")
            return
        self.reconcile_all((o.kind, o.name) for o in objects)

    def run(self, resync_s: float, stop: threading.Event) -> None:
        """Watch and reconcile until ``stop`` is set."""
        keys: queue.Queue[Key] = queue.Queue()
        self.ports.watch.start(lambda kind, name: keys.put((kind, name)), stop)
        next_resync = time.monotonic()
        while not stop.is_set():
            if time.monotonic() >= min(next_resync, self._wake_monotonic()):
                self.resync()
                next_resync = time.monotonic() + resync_s
            wake = min(next_resync, self._wake_monotonic())
            batch = take(keys, min(resync_s, max(0.0, wake - time.monotonic())), stop)
            if batch:
                self.reconcile_all(batch)

    def _wake_monotonic(self) -> float:
        """``wake_at`` on the monotonic clock (a little after it: the moment itself counts
        as changed); infinity when nothing is due."""
        if self.wake_at is None:
            return float("inf")
        return (
            time.monotonic()
            + max(0.0, (self.wake_at - self._clock()).total_seconds())
            + WAKE_LATE_S
        )


def ends_term(exc: NodeauError) -> None:
    """Raise the ``NotLeading`` behind ``exc`` (itself, or a port's error raised from it)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, NotLeading):
            raise cause from None
        cause = cause.__cause__


def watching_since(watched_at: datetime | None, now: datetime) -> datetime | None:
    """When this controller's watch of the fleet began again, if it was not watching (its
    first assessment, or one more than ``STALL`` after the last): quiet time it did not
    see is not counted against a machine (``domain.health.assess``)."""
    if watched_at is None or now - watched_at > STALL or now < watched_at:
        return now
    return None


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
            return batch
