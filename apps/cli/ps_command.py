"""``nodeau ps``: every workload holding a GPU, with its state and what happens next.

Decisions recorded here:

* ``ps`` is the command people run most, so it starts light: this module
  imports neither cyclopts nor the state adapter at import time. It asks the
  plane (``bootstrap.plane``) for its workloads; the one-machine plane opens
  its state only when a database exists, so a home without one lists nothing
  and creates nothing.
* On a fleet on Kubernetes the plane lists the cluster's objects instead,
  whichever way ``ps`` is reached, with the same columns and JSON keys.
* ``main.run`` calls :func:`ps` directly, without building the cyclopts app,
  for exactly the argument lists in :data:`FAST_ARGV`; anything else (``--help``,
  other flags, stray words) goes through cyclopts, which calls the same
  :func:`ps`. There is one ``ps``, whichever way it is reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nodeau.apps.cli.render import table, to_json

if TYPE_CHECKING:
    from nodeau.apps.planes.plane import WorkloadView

HEADERS = ("NAME", "KIND", "MODEL", "MACHINE", "GPU", "STATE", "ENDPOINT", "NOW")

# The argument lists main.run answers without cyclopts, with the --json they mean:
# those cyclopts itself reads as ps(json=False) and ps(json=True).
FAST_ARGV: dict[tuple[str, ...], bool] = {("ps",): False, ("ps", "--json"): True}


def fast_json(argv: Sequence[str]) -> bool | None:
    """``json`` for an argument list ``ps`` answers without cyclopts, else None."""
    return FAST_ARGV.get(tuple(argv))


def ps(*, json: bool = False) -> int:
    """Every workload holding a GPU, both kinds, with its state and what happens next.

    On a fleet on Kubernetes: every GPUService and BatchJob, decided or not.

    Parameters
    ----------
    json
        Print the rows as JSON.
    """
    from nodeau.apps.cli.bootstrap import plane

    views = plane().workloads()
    if json:
        print(to_json(views))
        return 0
    print(table(HEADERS, [row(v) for v in views]))
    return 0


def row(view: WorkloadView) -> tuple[str, ...]:
    """One line of the ``ps`` table; a simulated card says so after its UUID."""
    gpu = view.gpu or "-"
    return (
        view.name,
        view.kind,
        view.model,
        view.machine or "-",
        gpu
        + (" (simulated)" if view.simulated and view.gpu else "")
        + (" (model on the CPU)" if view.on_cpu and not view.simulated else ""),
        view.state,
        view.endpoint or "-",
        view.sentence,
    )
