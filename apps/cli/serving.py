"""``nodeau run``, ``stop``, ``service explain``, ``placement explain``,
``environment`` and ``fleet list`` on the one-machine plane.

On a fleet on Kubernetes (``cluster_plane``) run, stop, the explains and
``fleet list`` hand over to the ``cluster_*`` modules; ``environment`` always
reads this machine.

A refusal prints its kind, code and sentence, exits 2 and creates nothing.
``nodeau ps`` has its own light module, ``ps_command``.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Literal

from cyclopts import App, Parameter

from nodeau.apps.cli.render import size, table, to_json

if TYPE_CHECKING:
    from nodeau.ports.state import Admission

service_app = App(name="service", help="Explain a service's admission.")
placement_app = App(name="placement", help="Explain a workload's placement.")
fleet_app = App(name="fleet", help="The machines Nodeau can place work on.")
fleet_app.command(
    "nodeau.apps.cli.cluster_join:invite",
    name="invite",
    help="Create a bootstrap token and print the command that joins a new machine.",
)

REFUSED = 2


def parse_after(text: str) -> timedelta:
    """A recovery delay such as 90s, 3m or 1h."""
    units = {"s": 1, "m": 60, "h": 3600}
    if len(text) >= 2 and text[-1] in units and text[:-1].isdigit() and int(text[:-1]) > 0:
        return timedelta(seconds=int(text[:-1]) * units[text[-1]])
    from nodeau.apps.cli.errors import SettingsError

    raise SettingsError(f"--after {text!r}: give a positive whole number with s, m or h (e.g. 3m)")


def run(
    model: str,
    /,
    *,
    name: str | None = None,
    task: Literal["chat", "embed", "rerank"] = "chat",
    context: int | None = None,
    recovery: Literal["never", "automatic"] = "never",
    after: str = "3m",
    wait: float = 60,
    json: bool = False,
) -> int:
    """Admit, place and serve a model on this machine, behind a loopback endpoint.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id held verified on this machine.
    name
        The workload's name (default: the model's name).
    task
        What the workload serves: chat, embed or rerank.
    context
        Context size in tokens (default: the model's own, at most 4096).
    recovery
        What happens when its machine stops answering: never (wait) or automatic.
    after
        The recovery delay, e.g. 3m.
    wait
        On Kubernetes: seconds to wait for the controller's decision.
    json
        Print the result as JSON.
    """
    from nodeau.apps.cli.cluster_plane import on_kubernetes

    if on_kubernetes():
        from nodeau.apps.cli.cluster_run import run_on_cluster

        return run_on_cluster(
            model=model,
            name=name,
            task=task,
            context=context,
            recovery=recovery,
            after=parse_after(after),
            wait_s=wait,
            json=json,
        )
    from nodeau.apps.cli import plane as planes
    from nodeau.apps.cli.run_command import run_workload

    return run_workload(
        planes.build(),
        model=model,
        name=name,
        task=task,
        context=context,
        recovery=recovery,
        after=parse_after(after),
        json=json,
    )


def stop(
    name: str,
    /,
    *,
    workload: Annotated[bool, Parameter(negative="")] = False,
) -> int:
    """Stop a workload's endpoint; the model stays loaded, so starting again is instant.

    Parameters
    ----------
    name
        The workload.
    workload
        Stop the model too and free its card.
    """
    from nodeau.apps.cli.cluster_plane import on_kubernetes

    if on_kubernetes():
        from nodeau.apps.cli.cluster_workloads import stop as cluster_stop

        return cluster_stop(name, stop_model=workload)
    from nodeau.apps.cli import plane as planes
    from nodeau.apps.cli.run_command import stop_command

    return stop_command(planes.build(), name, stop_model=workload)


@service_app.command(name="explain")
def service_explain(name: str, /, *, json: bool = False) -> int:
    """The admission arithmetic: every term in bytes, labelled estimated or measured.

    Parameters
    ----------
    name
        The workload.
    json
        Print the recorded decision as JSON.
    """
    from nodeau.apps.cli.explain import admission_lines

    admission = recorded_admission(name)
    if json:
        print(to_json(admission.admitted))
        return 0
    simulated = any("SIM-GPU" in c.gpu_uuid for c in admission.admitted.cards)
    print("\n".join(admission_lines(admission, simulated)))
    return 0


@placement_app.command(name="explain")
def placement_explain(name: str, /, *, json: bool = False) -> int:
    """Why this machine and this card.

    Parameters
    ----------
    name
        The workload.
    json
        Print the recorded placement as JSON.
    """
    from nodeau.apps.cli.explain import placement_lines

    admission = recorded_admission(name)
    if json:
        print(to_json(admission.placement))
        return 0
    print("\n".join(placement_lines(admission)))
    return 0


def environment(*, json: bool = False) -> int:
    """What this machine has, read-only: its GPUs by UUID, or why it has none.

    Parameters
    ----------
    json
        Print the reading as JSON.
    """
    from nodeau.apps.cli.bootstrap import settings
    from nodeau.apps.machine import inventory_for

    s = settings()
    reading = inventory_for(s.machine, s.simulated_gpus).read()
    if json:
        print(to_json(reading))
        return 0
    print(f"machine  {reading.machine}{' (SIMULATED hardware)' if reading.simulated else ''}")
    print(f"note     {reading.note}")
    print(f"server   {server_line()}")
    rows = [
        (r.gpu.uuid, r.gpu.model, size(r.gpu.total_bytes), size(r.free_bytes), r.driver_version)
        for r in reading.gpus
    ]
    if rows:
        print(table(("GPU", "MODEL", "TOTAL", "FREE (READING)", "DRIVER"), rows))
    return 0


def server_line() -> str:
    """Which model server ``run`` would start, and why; or why there is none."""
    from nodeau.apps.cli.errors import SettingsError
    from nodeau.apps.cli.plane import model_server

    try:
        choice = model_server()
    except SettingsError as exc:
        return str(exc)
    return f"{choice.server.value} ({choice.program}): {choice.reason}"


@fleet_app.command(name="list")
def fleet_list(*, json: bool = False) -> int:
    """The machines of this fleet: on the one-machine plane, this machine.

    Parameters
    ----------
    json
        Print the machines as JSON.
    """
    from nodeau.apps.cli.cluster_plane import on_kubernetes

    if on_kubernetes():
        from nodeau.apps.cli.cluster_fleet import fleet_list as cluster_fleet_list

        return cluster_fleet_list(json=json)
    from nodeau.apps.cli.bootstrap import settings
    from nodeau.apps.machine import inventory_for

    s = settings()
    reading = inventory_for(s.machine, s.simulated_gpus).read()
    plane = "one machine (state in SQLite, no Kubernetes)"
    if json:
        print(to_json({"plane": plane, "machines": [reading]}))
        return 0
    print(f"plane: {plane}")
    gpus = ", ".join(f"{r.gpu.uuid} ({size(r.gpu.total_bytes)})" for r in reading.gpus) or "none"
    sim = "yes" if reading.simulated else "no"
    print(
        table(
            ("MACHINE", "HEALTH", "SIMULATED", "GPUS"), [(reading.machine, "reporting", sim, gpus)]
        )
    )
    return 0


def recorded_admission(name: str) -> Admission:
    """The admission recorded for a workload, as ``explain`` reads it (on either plane)."""
    from nodeau.apps.cli.cluster_plane import on_kubernetes

    if on_kubernetes():
        from nodeau.apps.cli.cluster_workloads import recorded_admission as on_cluster

        return on_cluster(name)
    from nodeau.adapters.sqlite_state import SqliteStateStore
    from nodeau.apps.cli.bootstrap import settings, utc_now

    return SqliteStateStore(settings().state_path, utc_now).admission(name)


def report_refusal(kind: str, code: str, sentence: str) -> int:
    print(f"refused ({kind}): {code}: {sentence}", file=sys.stderr)
    return REFUSED
