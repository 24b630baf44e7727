"""``nodeau scheduling``: drain, undrain and the scheduling policy — marks for new placements.

Decisions recorded here:

* On Kubernetes these are marks on the Node (drained, the per-machine policy)
  and the fleet-wide policy in ConfigMap ``nodeau-scheduling``
  (``adapters/kube/marks.py``); each prints the domain's sentence, which says
  that nothing running is stopped, moved or restarted.
* On the one-machine plane there is no other machine: draining the only one
  would refuse all new work with nowhere to send it, and pack and spread choose
  between machines. So these commands say that plainly, change nothing and
  exit 1, naming ``nodeau join`` as the way to a fleet. (The one-machine state
  keeps no marks; adding them would be state nothing reads.)
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Literal

from cyclopts import App

from nodeau.apps.cli.cluster_plane import on_kubernetes, open_cluster

scheduling_app = App(
    name="scheduling",
    help="Drain machines and choose the scheduling policy; new placements only.",
)

ONE_MACHINE = 1


def one_machine(what: str) -> int:
    """The answer on the one-machine plane: nothing to do, and why."""
    print(
        f"nodeau: this is the one-machine plane: {what}; nothing was changed "
        "(nodeau join adds this machine to a fleet on Kubernetes)",
        file=sys.stderr,
    )
    return ONE_MACHINE


@scheduling_app.command(name="drain")
def drain(*, node: str) -> int:
    """Place nothing new on a machine; what runs there is not stopped, moved or restarted.

    Parameters
    ----------
    node
        The machine (its Kubernetes Node name).
    """
    if not on_kubernetes():
        return one_machine(
            "a fleet of one has no other machine to send new work to, so there is nothing to drain"
        )
    from nodeau.adapters.kube.marks import drain as mark_drained

    print(mark_drained(open_cluster().api, node, datetime.now(UTC)).sentence)
    return 0


@scheduling_app.command(name="undrain")
def undrain(*, node: str) -> int:
    """Let a drained machine take new placements again; nothing is moved back to it.

    Parameters
    ----------
    node
        The machine (its Kubernetes Node name).
    """
    if not on_kubernetes():
        return one_machine("a fleet of one is never drained, so there is nothing to undrain")
    from nodeau.adapters.kube.marks import undrain as unmark_drained

    print(unmark_drained(open_cluster().api, node).sentence)
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
    if not on_kubernetes():
        return one_machine(
            "pack and spread choose between machines, and a fleet of one has one machine"
        )
    from nodeau.adapters.kube.marks import set_policy
    from nodeau.domain.placement import Policy

    print(set_policy(open_cluster().api, Policy(choice), node).sentence)
    return 0
