"""``nodeau plan``: the plan in force, where it came from and why; installing and removing
an entitlement.

Why it is so: docs/adr/decisions/apps-cli.md (plan.py).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cyclopts import App

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import to_json
from nodeau.apps.serving.commands import RunAsk
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from nodeau.apps.planes.plane import Plane
    from nodeau.apps.plans.commands import PlanView
    from nodeau.apps.serving.commands import Explanation

plan_app = App(
    name="plan",
    help="The plan in force and why; install or remove a signed entitlement.",
)

REFUSED = 2  # the exit code of an entitlement that was not installed
MAX_READ = 64 * 1024 + 1  # the verifier refuses anything longer; more is not read
NOTE = "A plan applies to new decisions only: nothing already serving is stopped by it."


@plan_app.default
def show(*, json: bool = False) -> int:
    """The plan in force, where it came from, its bounds and features, and why.

    Parameters
    ----------
    json
        Print it as JSON.
    """

    return show_on(bootstrap.plane(), json=json)


def show_on(on: Plane, *, json: bool = False) -> int:
    """``nodeau plan`` on ``on``."""
    view = on.plans.in_force()
    print(to_json(view) if json else "\n".join(plan_lines(view)))
    return 0


@plan_app.command(name="install")
def install(file: Path, /, *, json: bool = False) -> int:
    """Install a signed entitlement, if it can be accepted now; else say why.

    Parameters
    ----------
    file
        The entitlement document (docs/entitlement-format.md).
    json
        Print the outcome as JSON.
    """

    return install_on(bootstrap.plane(), file, json=json)


def install_on(on: Plane, file: Path, *, json: bool = False) -> int:
    """``nodeau plan install FILE`` on ``on``; 0 installed, 2 refused."""

    try:
        with file.open("rb") as f:
            document = f.read(MAX_READ)
    except OSError as exc:
        raise SettingsError(f"cannot read {file}: {exc.strerror or exc}") from exc
    outcome = on.plans.install(document, str(file))
    if json:
        print(to_json(outcome))
    elif outcome.installed:
        print("\n".join([outcome.sentence, *plan_lines(outcome.plan)]))
    else:
        print(f"nodeau: entitlement.{outcome.plan.reason}: {outcome.sentence}", file=sys.stderr)
    return 0 if outcome.installed else REFUSED


@plan_app.command(name="remove")
def remove() -> int:
    """Remove the installed entitlement: new decisions use the free Home plan."""

    print(bootstrap.plane().plans.remove())
    return 0


@plan_app.command(name="explain")
def explain(
    model: str,
    /,
    *,
    name: str | None = None,
    task: Literal["chat", "embed", "rerank"] = "chat",
    context: int | None = None,
    unproved: bool = False,
    json: bool = False,
) -> int:
    """Would nodeau run admit this now? Each check (qualification, permission, limit, quota,
    the plan's bounds, capacity) and the refusal run would print; nothing is started.

    Parameters
    ----------
    model
        What nodeau run would be given.
    name
        The workload's name (default: made from the model's name).
    task
        chat, embed or rerank.
    context
        Context size in tokens (default: the model's own, at most 4096).
    unproved
        As nodeau run --unproved: skip the qualification check.
    json
        Print it as JSON.
    """

    if context is not None and context <= 0:
        raise SettingsError("--context must be a positive number of tokens")
    ask = RunAsk(
        model=model,
        name=name,
        task=Task(task),
        context_tokens=context,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=3),
        unproved=unproved,
    )
    found = bootstrap.plane().serving.explain(ask)
    print(to_json(found) if json else "\n".join(explanation_lines(found)))
    return 0 if found.admitted else REFUSED


def explanation_lines(found: Explanation) -> list[str]:
    """``nodeau plan explain`` for a person: each check, then the answer."""
    lines = [f"if {found.user} ran {found.model} now on {found.plane}:"]
    for check in found.checks:
        mark = "ok" if check.passed else f"refused ({check.code})"
        lines.append(f"  {check.check}: {mark}: {check.sentence}")
    if found.refusal is None:
        lines.append("it would be admitted (nothing was started)")
    else:
        r = found.refusal
        lines.append(f"refused ({r.kind.value}): {r.code.value}: {r.sentence}")
    return lines


def bound(value: int | None) -> str:
    return "unbounded" if value is None else f"up to {value}"


def plan_lines(view: PlanView) -> list[str]:
    """``nodeau plan`` for a person: the plan and why, where from, bounds, dates, clock."""
    title = view.plan.capitalize()
    source = (
        "the free Home plan (no entitlement is installed)"
        if view.source is None
        else f"{view.source}, signed by key {view.key_id or '(none named)'}"
    )
    lines = [
        f"plan: {title} ({view.reason})",
        view.sentence,
        *([f"why: {view.detail}"] if view.detail and not view.accepted else []),
        *([f"warning: {view.warning}"] if view.warning else []),
        f"plane: {view.plane}",
        f"installation: {view.installation_id}",
        f"from: {source}",
        f"machines: {bound(view.max_machines)}",
        f"GPUs: {bound(view.max_gpus)}",
        f"features: {', '.join(view.features) or 'none'}",
        f"protections (every plan): {', '.join(view.protections)}",
    ]
    if view.not_before is not None and view.expires_at is not None:
        grace = "" if view.grace_until is None else f", grace until {view.grace_until.isoformat()}"
        lines.append(
            f"valid: from {view.not_before.isoformat()} until {view.expires_at.isoformat()}{grace}"
        )
    if view.clock_moved_back and view.clock_anchor is not None:
        lines.append(
            f"clock: moved back: it reads {view.clock.isoformat()}, and this installation has"
            f" already seen {view.clock_anchor.isoformat()}"
        )
    lines.append(NOTE)
    return lines
