"""The ``Plane`` interface and the views every command prints, on either plane.

Why it is so: docs/adr/decisions/apps-planes.md (plane.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from attrs import frozen

from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.ports.errors import NodeauError

if TYPE_CHECKING:  # annotations only: ``ps`` imports this module and stays light
    from nodeau.apps.batches.commands import BatchCommands
    from nodeau.apps.copies.commands import CopyCommands
    from nodeau.apps.machines.commands import MachineCommands
    from nodeau.apps.planes.status_rows import StatusRow
    from nodeau.apps.qualification.commands import QualificationCommands
    from nodeau.apps.recovery.commands import RecoveryCommands
    from nodeau.domain.records import Admission
    from nodeau.domain.refusals import Refusal
    from nodeau.domain.runs import Asked
    from nodeau.domain.tasks import Task
    from nodeau.domain.workloads import RecoveryMode


@frozen(kw_only=True)
class RunAsk:
    """What ``nodeau run`` asks for."""

    model: str
    name: str | None
    task: Task
    context_tokens: int | None
    recovery: RecoveryMode
    recovery_after: timedelta
    wait_s: float = 60.0  # a fleet: how long to wait for the controller's decision
    allowed_origins: tuple[str, ...] = ()  # web origins its endpoint also answers
    unproved: bool = False  # serve an imported model for a task it has not proved
    on_cpu: bool = False  # the card is held, the model runs on the CPU (--cpu)
    # the flags the person gave (None: none named, as for a program's ask): a workload
    # that exists is compared on these only, a flag not given meaning "as it is"
    asked: Asked | None = None


@frozen(kw_only=True)
class Started:
    """Admitted (or already serving): where it runs, what it reserves, its endpoint."""

    workload: WorkloadView
    reserved_bytes: int | None
    source: str | None  # "estimated" or "measured"
    already: bool = False  # it was already serving: only its endpoint was brought back
    endpoint_service: str | None = None  # how the loopback endpoint runs (one machine)


@frozen(kw_only=True)
class Refused:
    """Not admitted; nothing was created."""

    name: str
    refusal: Refusal


@frozen(kw_only=True)
class Undecided:
    """A fleet's controller did not decide in time; the request is left for it."""

    name: str
    waited_s: float


RunOutcome = Started | Refused | Undecided


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


@frozen(kw_only=True)
class CheckView:
    """One check of ``nodeau plan explain``: what it is, whether it passes, the refusal."""

    check: str  # "permission", "limit", "quota", "plan", "capacity"
    passed: bool
    sentence: str  # the refusal's own sentence, or what passed
    code: str | None  # the refusal's code when refused


@frozen(kw_only=True)
class Explanation:
    """``nodeau plan explain MODEL``: whether a run would be admitted now, and each check."""

    plane: str
    user: str
    model: str
    context_tokens: int | None
    admitted: bool
    refusal: Refusal | None  # the first "no": what ``nodeau run`` would print
    checks: tuple[CheckView, ...]


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

    def run(self, ask: RunAsk) -> RunOutcome:
        """Admit, place and start a service; a name already serving gets its endpoint back."""
        ...

    def workloads(self) -> tuple[WorkloadView, ...]:
        """Every workload holding a card (on a fleet also those not decided yet)."""
        ...

    def stop(self, name: str, *, workload: bool) -> str:
        """Stop the endpoint (the model stays loaded), or the workload too; what was done."""
        ...

    def admission(self, name: str) -> Admission:
        """The recorded admission of a workload (``service/placement explain``)."""
        ...

    def runtime_estimate(self, name: str) -> str | None:
        """llama.cpp's own memory estimate of the workload's configuration, asked now, as one
        line labelled the runtime's (never the admission figure); None where this plane
        cannot ask (a fleet's server is a Pod's) or the runtime gave none."""
        ...

    def logs(self, name: str, lines: int) -> tuple[str, ...]:
        """The last ``lines`` lines of a workload's model server log (a plane that cannot
        show them raises ``LogsUnavailable``)."""
        ...

    def follow_logs(self, name: str, lines: int) -> Iterator[str]:
        """The last ``lines`` lines of a workload's model server log, then each line as it
        is written, until the reader stops (a plane that cannot raises ``LogsUnavailable``)."""
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

    def explain_run(self, ask: RunAsk) -> Explanation:
        """Whether ``ask`` would be admitted now, and which check would refuse it; nothing is
        recorded or started."""
        ...


class LogsUnavailable(NodeauError):
    """This plane cannot show a workload's model server log (yet)."""
