"""What one reconcile batch reads about the fleet: read when first needed, then kept for the batch.

Why it is so: docs/adr/decisions/apps-controller.md (reading.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from attrs import field, frozen
from returns.result import Result

from nodeau.domain.catalog import Catalog
from nodeau.domain.fleet_admission import PlanKey, Planning, Proved, fleet_of
from nodeau.domain.fleet_reports import MachineReport, MarkedFleet
from nodeau.domain.free_cards import FreeCards
from nodeau.domain.hardware import Fleet
from nodeau.domain.health import MachineHealth
from nodeau.domain.memory import MeasuredTable
from nodeau.domain.organisation import Organisation, Spending
from nodeau.domain.plans import PlanTerms
from nodeau.domain.records import spending
from nodeau.domain.refusals import Refusal
from nodeau.domain.reservations import Ledger
from nodeau.ports.cluster import KeptEvidence
from nodeau.ports.models import CatalogSource
from nodeau.ports.state import WorkloadRecord


@frozen(kw_only=True)
class FleetInputs:
    """What a decision reads about the fleet, read once for a batch of reconciles."""

    reports: tuple[MachineReport, ...]
    marks: MarkedFleet
    health: Mapping[str, MachineHealth]
    plan: PlanTerms  # the plan in force: its bounds apply to every placement
    organisation: Organisation  # its limits apply to every placement
    table: MeasuredTable = field(factory=MeasuredTable)  # peaks measured on its cards
    cuda_image: bool = False  # a CUDA model-server image is configured: real cards may serve


def proved_reader(
    evidence: KeptEvidence | None, catalog: CatalogSource | None
) -> Callable[[], Proved] | None:
    """How a batch reads what the fleet counts as proved: the evidence kept in the cluster
    and the curated catalog (none: an empty one); None without evidence (nothing checked)."""
    if evidence is None:
        return None
    kept = evidence

    def read() -> Proved:
        listed = Catalog(entries=()) if catalog is None else catalog.load()
        return Proved(catalog=listed, evidence=kept.evidence())

    return read


class FleetReading:
    """The fleet, read when a reconcile first needs it and then kept for the batch; the
    machines' health alone when nothing needs more; what counts as proved only when a
    service is to be decided; what the workloads holding a card spend only when a decision
    is taken under a configured policy, then kept up to date with the batch's admissions.
    Shared by the batch's workers."""

    def __init__(
        self,
        read_fleet: Callable[[], FleetInputs],
        read_health: Callable[[], Mapping[str, MachineHealth]],
        read_proved: Callable[[], Proved] | None = None,
        read_spending: Callable[[], Iterable[Spending]] | None = None,
    ) -> None:
        self._read_fleet = read_fleet
        self._read_health = read_health
        self._read_proved = read_proved
        self._read_spending = read_spending
        self._fleet: FleetInputs | None = None
        self._health: Mapping[str, MachineHealth] | None = None
        self._proved: Proved | None = None
        self._spending: list[Spending] | None = None
        self._machines: Fleet | None = None
        self._cards: FreeCards | None = None
        # the batch's plannings, by the ask's shape: asks alike are planned once
        self.plans: dict[PlanKey, Result[Planning, Refusal]] = {}
        self._lock = threading.RLock()  # each part read once, whichever worker asks first
        self._counting = threading.Lock()  # one admission under a policy at a time

    @contextmanager
    def counting(self, counts: bool) -> Iterator[None]:
        """One admission and its ``spend`` under a configured policy (``counts``), with no
        other admission of the batch between them; nothing is held without a policy."""
        if not counts:
            yield
            return
        with self._counting:
            yield

    def machines(self) -> Fleet:
        """The fleet the batch's reports describe, made once for every decision of it."""
        with self._lock:
            if self._machines is None:
                inputs = self.fleet()
                self._machines = fleet_of(inputs.reports, inputs.marks)
            return self._machines

    def free_cards(self, ledger: Ledger) -> FreeCards:
        """The batch's free cards' index, brought to ``ledger`` (the claims as the store
        knows them for this decision): made at the first decision, then followed."""
        with self._lock:
            if self._cards is None:
                inputs = self.fleet()
                self._cards = FreeCards.of(
                    self.machines(), ledger, inputs.marks.settings, inputs.plan
                )
            else:
                self._cards = self._cards.follow(ledger)
            return self._cards

    def fleet(self) -> FleetInputs:
        with self._lock:
            if self._fleet is None:
                self._fleet = self._read_fleet()
            return self._fleet

    def health(self) -> Mapping[str, MachineHealth]:
        with self._lock:
            if self._fleet is not None:
                return self._fleet.health
            if self._health is None:
                self._health = self._read_health()
            return self._health

    def proved(self) -> Proved | None:
        """What the fleet counts as proved (read once); None: nothing is checked."""
        with self._lock:
            if self._read_proved is None:
                return None
            if self._proved is None:
                self._proved = self._read_proved()
            return self._proved

    def spending(self) -> tuple[Spending, ...] | None:
        """What the workloads holding a card spend (read once, then each admission of the
        batch added by ``spend``); None: the store's snapshot carries the records."""
        with self._lock:
            if self._read_spending is None:
                return None
            if self._spending is None:
                self._spending = list(self._read_spending())
            return tuple(self._spending)

    def spend(self, record: WorkloadRecord) -> None:
        """Count a workload this batch admitted, once its spending was read."""
        with self._lock:
            if self._spending is not None:
                self._spending.extend(spending((record,)))
