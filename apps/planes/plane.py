"""The ``Plane`` interface and the views every command prints, on either plane.

Why it is so: docs/adr/decisions/apps-planes.md (plane.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from attrs import frozen

if TYPE_CHECKING:  # annotations only: ``ps`` imports this module and stays light
    from nodeau.apps.batches.commands import BatchCommands
    from nodeau.apps.copies.commands import CopyCommands
    from nodeau.apps.machines.commands import MachineCommands
    from nodeau.apps.planes.status_rows import StatusRow
    from nodeau.apps.qualification.commands import QualificationCommands
    from nodeau.apps.recovery.commands import RecoveryCommands
    from nodeau.apps.serving.commands import ServingCommands


@frozen(kw_only=True)
class PlanView:
    """``nodeau plan``: the terms in force, where they came from, why, and the clock."""

    plane: str
    installation_id: str  # what a vendor issues an entitlement for
    plan: str  # "home", "pro", "team", "enterprise"
    accepted: bool  # an entitlement's terms are in force (else the Home plan's)
    reason: str  # "accepted", or why the Home plan applies ("none-present", "expired", ...)
    sentence: str
    detail: str | None  # what was wrong with the document, when it says
    warning: str | None  # accepted, and expiring soon or in its grace
    source: str | None  # where the installed document is kept; None when none is installed
    key_id: str | None  # the key the document names
    features: tuple[str, ...]
    max_machines: int | None  # None: unbounded
    max_gpus: int | None
    protections: tuple[str, ...]  # identical on every plan
    not_before: datetime | None  # from a document whose signature verified
    expires_at: datetime | None
    grace_until: datetime | None  # new decisions keep its terms until then
    clock: datetime  # the time this was decided at
    clock_anchor: datetime | None  # the newest moment this installation has seen
    clock_moved_back: bool


@frozen(kw_only=True)
class PlanInstall:
    """``nodeau plan install``: whether the document was installed, and what it gives."""

    installed: bool
    sentence: str
    plan: PlanView  # installed: the plan in force now; refused: what the document gives


@frozen(kw_only=True)
class QuotaView:
    """One quota of ``nodeau organisation``: whose, its bounds, what is spent now."""

    subject: str  # "user NAME" or "team NAME"
    max_gpus_held: int | None
    max_workloads: int | None
    gpus_held: int
    workloads: int


@frozen(kw_only=True)
class OrganisationView:
    """``nodeau organisation``: the policy in force, where it is kept, and who is asking."""

    plane: str
    where: str
    configured: bool
    user: str
    groups: tuple[str, ...]
    role: str  # the asking person's role
    roles: dict[str, tuple[str, ...]]  # role -> entries ("NAME" or "group:NAME")
    everyone: str
    max_context_tokens: int | None
    max_model_bytes: int | None
    allowed_models: tuple[str, ...] | None  # None: any model
    allowed_machines: tuple[str, ...] | None  # None: every machine
    quotas: tuple[QuotaView, ...]
    contact: str | None


class PlanCommands(Protocol):
    """The plan of one plane: the entitlement in force, installing one, removing it."""

    def in_force(self, *, advance: bool = True) -> PlanView:
        """The plan in force: the installed entitlement's terms if it can be accepted, else
        the Home plan's with the reason; advances the clock anchor unless ``advance`` is
        False (a reader that only shows it)."""
        ...

    def install(self, document: bytes, source: str) -> PlanInstall:
        """Keep ``document`` (read from ``source``) as this plane's entitlement if it can be
        accepted now; a document that cannot is refused with its reason and nothing is
        replaced."""
        ...

    def remove(self) -> str:
        """Remove the installed entitlement (new decisions use the Home plan; nothing
        serving stops); what was done."""
        ...


class OrganisationCommands(Protocol):
    """The organisation's policy on one plane."""

    def view(self) -> OrganisationView:
        """The organisation's policy in force and who is asking."""
        ...

    def install(self, document: bytes, source: str) -> str:
        """Install a policy document (an admin's, on a plan that includes it); what was done."""
        ...

    def remove(self) -> str:
        """Remove the policy (an admin's); what was done."""
        ...


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
