"""``nodeau scheduling``: drain, undrain and the scheduling policy, on either plane.

Why it is so: docs/adr/decisions/apps-cli.md (scheduling.py).
"""

from __future__ import annotations

from typing import Literal

from cyclopts import App

from nodeau.apps.cli import bootstrap
from nodeau.domain.placement import Policy

scheduling_app = App(
    name="scheduling",
    help="Drain machines and choose the scheduling policy; new placements only.",
)


@scheduling_app.command(name="drain")
def drain(*, node: str) -> int:
    """Place nothing new on a machine; what runs there is not stopped, moved or restarted.

    Parameters
    ----------
    node
        The machine (on Kubernetes, its Node name).
    """

    print(bootstrap.plane().machines.drain(node))
    return 0


@scheduling_app.command(name="undrain")
def undrain(*, node: str) -> int:
    """Let a drained machine take new placements again; nothing is moved back to it.

    Parameters
    ----------
    node
        The machine (on Kubernetes, its Node name).
    """

    print(bootstrap.plane().machines.undrain(node))
    return 0


@scheduling_app.command(name="policy")
def policy(choice: Literal["pack", "spread"], /, *, node: str | None = None) -> int:
    """Set the scheduling policy, fleet-wide or for one machine; new placements only.

    Parameters
    ----------
    choice
        pack fills the fullest machine first; spread prefers the emptiest.
    node
        Set this machine's own override instead of the fleet-wide policy.
    """

    print(bootstrap.plane().machines.set_policy(Policy(choice), node))
    return 0
