"""The ``Plane`` interface: a bag of the features every command uses, on either plane.

Why it is so: docs/adr/decisions/apps-planes.md (plane.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: ``ps`` imports this module and stays light
    from nodeau.apps.batches.commands import BatchCommands
    from nodeau.apps.copies.commands import CopyCommands
    from nodeau.apps.machines.commands import MachineCommands
    from nodeau.apps.organisation.commands import OrganisationCommands
    from nodeau.apps.planes.status_rows import StatusRow
    from nodeau.apps.plans.commands import PlanCommands
    from nodeau.apps.qualification.commands import QualificationCommands
    from nodeau.apps.recovery.commands import RecoveryCommands
    from nodeau.apps.serving.commands import ServingCommands


class Plane(Protocol):
    """Everything the CLI does with workloads and machines, on one plane."""

    @property
    def description(self) -> str:
        """Which plane this is, for a person (``fleet list``'s first line)."""
        ...

    @property
    def serving(self) -> ServingCommands:
        """``nodeau run|stop|ps|logs``, ``service explain`` and ``plan explain``: services,
        the workloads holding cards, and whether a run would be admitted now."""
        ...

    def model_status(self) -> tuple[StatusRow, ...]:
        """Which machine holds which model files, downloaded and verified apart: this
        machine's cache, or every machine of a fleet as its agent last reported it."""
        ...

    @property
    def machines(self) -> MachineCommands:
        """``nodeau fleet list|drain|undrain|policy|upgrade``: every machine, its marks."""
        ...

    @property
    def recovery(self) -> RecoveryCommands:
        """``nodeau recovery set|status``: what each service does when its machine stops
        answering."""
        ...

    @property
    def batches(self) -> BatchCommands:
        """``nodeau batch submit|status|results|stop``: batch jobs on admitted cards."""
        ...

    @property
    def qualification(self) -> QualificationCommands:
        """``nodeau model qualify`` and ``nodeau model info``: a model's capabilities and
        memory, measured on this plane's cards."""
        ...

    @property
    def copies(self) -> CopyCommands:
        """``nodeau models copy|copies``: verified copies kept on the fleet's machines."""
        ...

    @property
    def plans(self) -> PlanCommands:
        """``nodeau plan``: the entitlement in force here, installing one, removing it."""
        ...

    @property
    def organisation(self) -> OrganisationCommands:
        """``nodeau organisation``: the policy in force and who asks, installing one,
        removing it."""
        ...
