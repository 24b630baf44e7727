"""What ``nodeau run|stop|ps|logs``, ``service explain`` and ``plan explain`` ask and show,
and ``ServingCommands``, the interface each plane carries them out behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from attrs import frozen

from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.domain.runs import name_from_model, name_problem
from nodeau.ports.errors import NodeauError, SettingsError

if TYPE_CHECKING:
    from nodeau.domain.decision import Checked
    from nodeau.domain.records import Admission
    from nodeau.domain.refusals import Refusal
    from nodeau.domain.runs import Asked
    from nodeau.domain.tasks import Task
    from nodeau.domain.workloads import RecoveryMode

LOG_LINES = 50  # ``nodeau logs`` without --lines


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


class ServingCommands(Protocol):
    """The services of one plane: running one, listing and stopping workloads, a workload's
    admission and log, and whether a run would be admitted now."""

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

    def explain(self, ask: RunAsk) -> Explanation:
        """Whether ``ask`` would be admitted now, and which check would refuse it; nothing is
        recorded or started."""
        ...


class LogsUnavailable(NodeauError):
    """This plane cannot show a workload's model server log (yet)."""


def workload_name(asked: str | None, model: str) -> str:
    """``--name`` when valid, else a name made from the model's (the domain's rule)."""
    if asked is not None:
        if (problem := name_problem(asked)) is not None:
            raise SettingsError(f"--name {problem}")
        return asked
    made = name_from_model(model)
    if made is None:
        raise SettingsError(f"cannot make a workload name from {model!r}; give --name")
    return made


def check_view(checked: Checked) -> CheckView:
    """One domain check as ``plan explain`` shows it."""
    refusal = checked.refusal
    return CheckView(
        check=checked.check,
        passed=refusal is None,
        sentence=checked.sentence,
        code=None if refusal is None else refusal.code.value,
    )
