"""``QualificationCommands`` on a fleet: a GPUService per task, probed from this command,
its evidence kept in the cluster for every machine's admission to read."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime

from attrs import frozen

from nodeau.apps.models.services import ModelServices
from nodeau.apps.qualification.commands import (
    QualificationUnavailable,
    QualificationView,
    qualification_view,
)
from nodeau.apps.qualification.fleet_info import fleet_model_info
from nodeau.apps.qualification.fleet_qualify import Decide, fleet_model, qualify_on_fleet
from nodeau.apps.qualification.info_view import ModelInfoView
from nodeau.apps.qualification.machine_qualify import Probe
from nodeau.apps.serving.commands import Refused
from nodeau.domain.catalog import Catalog
from nodeau.ports.cluster import MachineReports, QualificationRecords, ServerPods, WorkloadObjects


@frozen(kw_only=True)
class FleetProbes:
    """How this command probes a model server the fleet runs: each capability's probe,
    and whether the server answers its health check yet."""

    probe: Probe
    healthy: Callable[[str], bool]


@frozen(kw_only=True)
class FleetQualification:
    """``QualificationCommands`` where the plane is a fleet; ``records`` is the evidence
    port (raising when this connection has none), ``runtime`` names the fleet's server."""

    _objects: WorkloadObjects
    _reports: MachineReports
    _pods: ServerPods
    _records: Callable[[], QualificationRecords]
    _decision: Decide
    _clock: Callable[[], datetime]
    _probes: Callable[[], FleetProbes] | None  # None: this connection cannot probe
    _runtime: str
    _catalog: Callable[[], Catalog]
    _models: Callable[[], ModelServices] | None  # None: this command cannot read them

    def qualify(
        self, model: str, context_tokens: int | None, seed: int | None = None
    ) -> QualificationView | Refused:
        if self._probes is None:
            raise QualificationUnavailable(
                "this connection to the fleet cannot probe a model; nodeau model qualify "
                "needs the CLI's own connection"
            )
        probes = self._probes()
        records = self._records()
        drawn = seed if seed is not None else random.SystemRandom().randrange(2**32)
        done = qualify_on_fleet(
            objects=self._objects,
            reports=lambda: self._reports.read().reports,
            records=records,
            pods=self._pods,
            decide=self._decision,
            clock=self._clock,
            probe=probes.probe,
            healthy=probes.healthy,
            runtime=self._runtime,
            model=model,
            context_tokens=context_tokens,
            seed=drawn,
        )
        if isinstance(done, Refused):
            return done
        shown = fleet_model(model, self._reports.read().reports).name
        return qualification_view(shown, done)

    def info(self, model: str) -> ModelInfoView:
        return fleet_model_info(
            model,
            reports=self._reports.read().reports,
            records=self._records(),
            catalog=self._catalog(),
            here=None if self._models is None else self._models(),
        )
