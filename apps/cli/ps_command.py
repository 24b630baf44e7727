"""``nodeau ps``: every workload holding a GPU, with its state and what happens next.

It starts light (no cyclopts, no state adapter at import): ``main.run`` calls :func:`ps`
for :data:`FAST_ARGV`, cyclopts calls ``serving.ps``, which calls it. The table fits 100
columns, each row's endpoint and sentence beneath it; ``-o wide``: one line a workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from nodeau.apps.cli.bootstrap import workloads
from nodeau.apps.cli.render import table, to_json

if TYPE_CHECKING:
    from nodeau.apps.planes.workload_view import WorkloadView

HEADERS = ("NAME", "KIND", "MODEL", "MACHINE", "GPU", "STATE", "ENDPOINT", "NOW")  # -o wide
NARROW = ("NAME", "KIND", "MODEL", "MACHINE", "GPU", "STATE")

# The argument lists main.run answers without cyclopts, with the --json they mean:
# those cyclopts itself reads as ps(json=False) and ps(json=True).
FAST_ARGV: dict[tuple[str, ...], bool] = {("ps",): False, ("ps", "--json"): True}


def fast_json(argv: Sequence[str]) -> bool | None:
    """``json`` for an argument list ``ps`` answers without cyclopts, else None."""
    return FAST_ARGV.get(tuple(argv))


def ps(*, json: bool = False, output: Literal["wide"] | None = None) -> int:
    """What ``nodeau ps`` prints, however it is reached (its options: ``serving.ps``)."""
    views = workloads()
    if json:
        print(to_json(views))
        return 0
    print(table(HEADERS, [row(v) for v in views]) if output == "wide" else narrow(views))
    return 0


def narrow(views: Sequence[WorkloadView]) -> str:
    """The default table: short GPU ids, and beneath each row its endpoint's address (the
    URL a client uses, where it has one) and its sentence, each on its own line."""
    lines = table(NARROW, [short_row(v) for v in views]).splitlines()
    out = lines[:1]
    for line, view in zip(lines[1:], views, strict=True):
        out.append(line)
        if view.endpoint:
            out.append(f"  {view.endpoint}")
        out.append(f"  {view.sentence}")  # whole: a terminal wraps it, a copied command stays
    return "\n".join(out)


def short_gpu(uuid: str) -> str:
    """A card's UUID up to its first group (``GPU-092fee4d``, ``SIM-GPU-092fee4d``): enough
    to tell the cards of a machine apart; ``-o wide`` and ``--json`` give it whole."""
    prefix, found, rest = uuid.rpartition("GPU-")
    return f"{prefix}GPU-{rest.split('-')[0]}" if found and rest else uuid


def short_row(view: WorkloadView) -> tuple[str, ...]:
    """One line of the default table; a simulated card says so, by its UUID's prefix or in
    words."""
    from nodeau.domain.model_server import SIMULATED_UUID_PREFIX

    gpu = ",".join(short_gpu(c) for c in view.every_card) or "-"
    if view.simulated and view.gpu and not view.gpu.startswith(SIMULATED_UUID_PREFIX):
        gpu += " (simulated)"
    if view.on_cpu and not view.simulated and view.gpu:
        gpu += " (model on CPU)"
    return (
        view.name,
        view.kind,
        view.model,
        view.machine or "-",
        gpu,
        view.state,
    )


def row(view: WorkloadView) -> tuple[str, ...]:
    """One line of the ``ps`` table; a simulated card says so after its UUID."""
    gpu = ",".join(view.every_card) or "-"
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
