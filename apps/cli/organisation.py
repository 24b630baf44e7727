"""``nodeau organisation``: the organisation's policy (roles, limits, quotas), who you are under
it, and what each quota has spent; installing and removing the policy (an admin's action).

Why it is so: docs/adr/decisions/apps-cli.md (organisation.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cyclopts import App

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import to_json
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from nodeau.apps.organisation.commands import OrganisationView

organisation_app = App(
    name="organisation",
    help="Roles, limits and quotas: the policy in force, who you are under it; install or remove.",
)

MAX_READ = 1024 * 1024 + 1  # the reader refuses anything longer; more is not read


@organisation_app.default
def show(*, json: bool = False) -> int:
    """The policy in force, where it is kept, your role, its limits and each quota's spending.

    Parameters
    ----------
    json
        Print it as JSON.
    """

    view = bootstrap.plane().organisation.view()
    print(to_json(view) if json else "\n".join(organisation_lines(view)))
    return 0


@organisation_app.command(name="install")
def install(file: Path, /) -> int:
    """Install a policy document (an admin's action, on a plan with organisation limits).

    Parameters
    ----------
    file
        The policy (docs/organisation-format.md).
    """

    try:
        with file.open("rb") as f:
            document = f.read(MAX_READ)
    except OSError as exc:
        raise SettingsError(f"cannot read {file}: {exc.strerror or exc}") from exc
    print(bootstrap.plane().organisation.install(document, str(file)))
    return 0


@organisation_app.command(name="remove")
def remove() -> int:
    """Remove the installed policy (an admin's action): no roles, limits or quotas apply."""

    print(bootstrap.plane().organisation.remove())
    return 0


def _bound(value: int | None, unit: str = "") -> str:
    return "no limit" if value is None else f"{value:,}{unit}"


def _names(values: tuple[str, ...] | None, everything: str) -> str:
    return everything if values is None else ", ".join(values) or "none"


def organisation_lines(view: OrganisationView) -> list[str]:
    """``nodeau organisation`` for a person."""
    if not view.configured:
        head = (
            f"policy: none installed ({view.where}): everybody is an admin, nothing is limited, "
            "no quota"
        )
    else:
        head = f"policy: {view.where}"
    groups = ", ".join(view.groups) or "none"
    lines = [
        head,
        f"plane: {view.plane}",
        f"you: {view.user} (groups: {groups}), role {view.role}",
        *(f"{role}s: {', '.join(entries) or 'none'}" for role, entries in view.roles.items()),
        f"everyone else: {view.everyone}",
        f"largest context: {_bound(view.max_context_tokens, ' tokens')}",
        f"largest model: {_bound(view.max_model_bytes, ' bytes')}",
        f"models permitted: {_names(view.allowed_models, 'any')}",
        f"machines in scope: {_names(view.allowed_machines, 'every machine')}",
    ]
    for q in view.quotas:
        lines.append(
            f"quota of {q.subject}: {q.gpus_held} of {_bound(q.max_gpus_held)} GPUs, "
            f"{q.workloads} of {_bound(q.max_workloads)} workloads"
        )
    if not view.quotas:
        lines.append("quotas: none")
    if view.contact:
        lines.append(f"contact: {view.contact}")
    return lines
