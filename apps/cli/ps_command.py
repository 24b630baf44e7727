"""``nodeau ps``: every workload holding a GPU, with its state and what happens next.

Decisions recorded here:

* ``ps`` is the command people run most, so it starts light: this module
  imports neither cyclopts nor the state adapter at import time. The state
  adapter (SQLite, cattrs, the domain's admission values) is imported only
  when a state database exists; a home without one lists nothing and creates
  nothing.
* On a fleet on Kubernetes (``cluster_plane``: NODEAU_PLANE or plane.json,
  read cheaply) ``ps`` lists the cluster's objects instead, whichever way it
  is reached.
* ``main.run`` calls :func:`ps` directly, without building the cyclopts app,
  for exactly the argument lists in :data:`FAST_ARGV`; anything else (``--help``,
  other flags, stray words) goes through cyclopts, which calls the same
  :func:`ps`. There is one ``ps``, whichever way it is reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from nodeau.apps.cli.render import table, to_json

if TYPE_CHECKING:
    from nodeau.ports.state import WorkloadRecord

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
    from nodeau.apps.cli.cluster_plane import on_kubernetes

    if on_kubernetes():  # never the machine's rows when the fleet is on Kubernetes
        from nodeau.apps.cli.cluster_workloads import ps as cluster_ps

        return cluster_ps(json=json)
    from nodeau.apps.cli.bootstrap import settings, utc_now

    s = settings()
    records = gpu_holders(s.state_path)
    now = utc_now()
    if json:
        print(to_json([{"record": r, "sentence": sentence(r, now)} for r in records]))
        return 0
    print(table(HEADERS, [row(r, now, bool(s.simulated_gpus)) for r in records]))
    return 0


def gpu_holders(state_path: Path) -> tuple[WorkloadRecord, ...]:
    """The recorded workloads that hold a card, in the order they were admitted.

    No database yet means no workloads: nothing is created to say so.
    """
    if not state_path.exists():
        return ()
    from nodeau.adapters.sqlite_state import SqliteStateStore
    from nodeau.apps.cli.bootstrap import utc_now
    from nodeau.domain.workloads import holds_gpu

    workloads = SqliteStateStore(state_path, utc_now).snapshot().workloads
    return tuple(r for r in workloads if holds_gpu(r.workload.state))


def sentence(record: WorkloadRecord, now: datetime) -> str:
    """The one sentence ``ps`` shows for a workload (the domain's ``ps_sentence``)."""
    from nodeau.domain.workloads import ps_sentence

    return ps_sentence(record.workload, now)


def row(record: WorkloadRecord, now: datetime, simulated: bool) -> tuple[str, ...]:
    """One line of the ``ps`` table; a simulated card says so after its UUID."""
    w = record.workload
    return (
        w.name,
        w.kind.value,
        w.model,
        w.machine,
        w.gpu_uuid + (" (simulated)" if simulated else ""),
        w.state.value,
        f"http://127.0.0.1:{record.endpoint_port}/v1" if record.endpoint_port else "-",
        sentence(record, now),
    )
