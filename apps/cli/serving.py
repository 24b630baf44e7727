"""``nodeau run``, ``stop``, ``service explain``, ``placement explain`` and
``fleet list``: written once against the ``Plane``.

Why it is so: docs/adr/decisions/apps-cli.md (serving.py).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from attrs import frozen
from cyclopts import App, Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.durations import duration_option
from nodeau.apps.cli.explain import admission_lines, placement_lines
from nodeau.apps.cli.interrupts import signals_interrupt
from nodeau.apps.cli.ps_command import ps as listed
from nodeau.apps.cli.render import size, table, to_json
from nodeau.apps.serving.commands import Refused, RunAsk, Started, Undecided
from nodeau.domain.runs import Asked
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.errors import SettingsError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nodeau.apps.machines.commands import FleetListing, MachineView
    from nodeau.apps.planes.workload_view import WorkloadView
    from nodeau.apps.serving.commands import RunOutcome
    from nodeau.domain.refusals import Refusal

service_app = App(name="service", help="Explain a service's admission.")
placement_app = App(name="placement", help="Explain a workload's placement.")
fleet_app = App(name="fleet", help="The machines Nodeau can place work on.")
fleet_app.command(
    "nodeau.apps.cli.cluster_join:invite",
    name="invite",
    help="Create a bootstrap token and print the command that joins a new machine.",
)
fleet_app.command(
    "nodeau.apps.cli.upgrade:upgrade",
    name="upgrade",
    help="Mark a machine upgrading (nothing on it moves), or --done to take the mark off.",
)

REFUSED = 2
UNDECIDED = 1
DEFAULT_AFTER = "3m"  # the recovery delay of a new workload when --after is not given


def parse_after(text: str) -> timedelta:
    """A recovery delay such as 90s, 3m or 1h30m."""

    return duration_option("--after", text)


def run(
    model: str,
    /,
    *,
    name: str | None = None,
    task: Literal["chat", "embed", "rerank"] | None = None,
    context: int | None = None,
    recovery: Literal["never", "automatic"] | None = None,
    after: str | None = None,
    wait: float = 60,
    allow_origin: tuple[str, ...] = (),
    unproved: bool = False,
    cpu: Annotated[bool | None, Parameter(negative="")] = None,
    json: bool = False,
) -> int:
    """Admit, place and serve a model, behind a loopback endpoint.

    A name that already serves gets its endpoint back, as it is: a flag left out keeps
    what it runs with, and one that differs is refused, saying how to change it.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id held verified on this machine.
    name
        The workload's name (default: made from the model's name).
    task
        What the workload serves: chat, embed or rerank (default: chat).
    context
        Context size in tokens (default: the model's own, at most 4096).
    recovery
        What happens when its machine stops answering: never (wait, the default) or
        automatic.
    after
        The recovery delay: 3m (the default), 90s, 1h30m, 2d.
    wait
        On Kubernetes: seconds to wait for the controller's decision.
    allow_origin
        A web origin (scheme://host[:port]) whose pages the endpoint also answers, beyond
        loopback pages, with CORS answers its pages can read; repeatable.
    unproved
        Serve an imported model for a task its qualification has not proved (nodeau model
        qualify proves it); without it, such a run is refused.
    cpu
        Run the model on the CPU: its card is still admitted and held for it. Without it, a
        model server that cannot use this machine's cards is refused them.
    json
        Print the result as JSON.
    """

    refuse_a_file(model)
    if wait < 0:
        raise SettingsError("--wait must be zero or more seconds")
    if context is not None and context <= 0:
        raise SettingsError("--context must be a positive number of tokens")
    asked = Asked(
        context_tokens=context,
        task=None if task is None else Task(task),
        recovery=None if recovery is None else RecoveryMode(recovery),
        recovery_after=None if after is None else parse_after(after),
        on_cpu=cpu,
    )
    ask = RunAsk(
        model=model,
        name=name,
        task=asked.task or Task.CHAT,
        context_tokens=context,
        recovery=asked.recovery or RecoveryMode.NEVER,
        recovery_after=asked.recovery_after or parse_after(DEFAULT_AFTER),
        wait_s=wait,
        allowed_origins=allow_origin,
        unproved=unproved,
        on_cpu=bool(cpu),
        asked=asked,
    )
    with signals_interrupt():
        try:
            outcome = bootstrap.plane().serving.run(ask)
        except KeyboardInterrupt:
            print(
                f"nodeau: run {model} interrupted (nodeau ps shows whether anything of it is left)",
                file=sys.stderr,
            )
            raise
    return report_run(outcome, json=json)


def ps(
    *,
    json: bool = False,
    output: Annotated[Literal["wide"] | None, Parameter(name=["--output", "-o"])] = None,
) -> int:
    """Every workload holding a GPU, both kinds, with its state and what happens next.

    On a fleet on Kubernetes: every GPUService and BatchJob, decided or not. The table
    fits 100 columns: GPU ids are shortened, and each workload's endpoint (the URL a
    client uses) and sentence are on their own lines beneath it.

    Parameters
    ----------
    json
        Print the rows as JSON.
    output
        ``wide``: one line a workload, full GPU UUIDs, the sentence last.
    """

    return listed(json=json, output=output)


def report_run(outcome: RunOutcome, *, json: bool) -> int:
    """Print what ``run`` did; its exit code (0, 1 undecided, 2 refused)."""

    match outcome:
        case Refused(refusal=refusal):
            return report_refusal(refusal)
        case Undecided(name=name, waited_s=waited):
            print(
                f"nodeau: the controller did not decide on {name} within {waited:g} seconds; "
                f"it is left for the controller (nodeau ps shows it; nodeau stop {name} "
                "--workload removes it). Is the controller running? "
                "kubectl -n nodeau-system get deployments",
                file=sys.stderr,
            )
            return UNDECIDED
        case Started() as started:
            if json:
                print(to_json(started))
            else:
                print("\n".join(started_lines(started)))
            return 0
    raise AssertionError("a run outcome is Started, Refused or Undecided")


def started_lines(started: Started) -> list[str]:
    """What ``run`` prints for a workload admitted (or already serving)."""
    w = started.workload
    if started.already:
        return [f"{w.name} is already serving; its endpoint is back at {w.endpoint}"]
    hardware = " (SIMULATED card: the model runs on the CPU)" if w.simulated else ""
    if w.on_cpu and not w.simulated:
        hardware = " (held for it: the model runs on the CPU, as --cpu asked)"
    reserving = (
        f", reserving {size(started.reserved_bytes)} ({started.source})"
        if started.reserved_bytes is not None
        else ""
    )
    cards = ", ".join(w.every_card)
    if len(w.every_card) > 1:
        hardware = hardware.replace("card:", "cards:")
        cards = f"split across {len(w.every_card)} cards, {cards}"
        reserving = reserving.replace(" (", " in all (", 1)
    lines = [f"{w.name}: admitted on {w.machine}, {cards}{hardware}{reserving}"]
    lines.append(f"state {w.state}: {w.sentence}")
    if w.endpoint is None:
        lines.append(
            "no endpoint yet: the model server is starting (nodeau ps shows when it serves)"
        )
    else:
        how = f" (endpoint: {started.endpoint_service})" if started.endpoint_service else ""
        lines.append(f"serving at {w.endpoint}{how}")
    return lines


def stop(
    name: str,
    /,
    *,
    workload: Annotated[bool, Parameter(negative="")] = False,
    json: bool = False,
) -> int:
    """Stop a workload's endpoint; the model stays loaded, so starting again is instant.

    Parameters
    ----------
    name
        The workload.
    workload
        Stop the model too and free its card.
    json
        Print what was done as JSON, keys: name; workload (whether --workload was given);
        kind (service or batch, null when no record named it); gpu (the card it held
        before); cards (every card it held before, gpu first: several when it was split);
        holds_gpu, state and endpoint (what nodeau ps says of it afterwards: false, null
        and null once it is gone); sentence (what is printed without --json).
    """

    on = bootstrap.plane()
    if not json:
        print(on.serving.stop(name, workload=workload))
        return 0
    before = _row(on.serving.workloads(), name)
    sentence = on.serving.stop(name, workload=workload)
    after = _row(on.serving.workloads(), name)
    stopped = Stopped(
        name=name,
        workload=workload,
        kind=None if before is None else before.kind,
        gpu=None if before is None else before.gpu,
        cards=() if before is None else before.every_card,
        holds_gpu=after is not None,
        state=None if after is None else after.state,
        endpoint=None if after is None else after.endpoint,
        sentence=sentence,
    )
    print(to_json(stopped))
    return 0


@frozen(kw_only=True)
class Stopped:
    """What ``nodeau stop --json`` prints: what was asked, said, and what ``ps`` says now."""

    name: str
    workload: bool
    kind: str | None
    gpu: str | None
    cards: tuple[str, ...]
    holds_gpu: bool
    state: str | None
    endpoint: str | None
    sentence: str


def _row(views: Sequence[WorkloadView], name: str) -> WorkloadView | None:
    return next((v for v in views if v.name == name), None)


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

    admission = bootstrap.plane().serving.admission(name)
    if json:
        print(to_json(admission.admitted))
        return 0
    simulated = any("SIM-GPU" in c.gpu_uuid for c in admission.admitted.cards)
    print("\n".join(admission_lines(admission, simulated)))
    second = bootstrap.plane().serving.runtime_estimate(name)
    if second is not None:
        print(second)
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

    admission = bootstrap.plane().serving.admission(name)
    if json:
        print(to_json(admission.placement))
        return 0
    print("\n".join(placement_lines(admission)))
    return 0


@fleet_app.command(name="list")
def fleet_list(*, json: bool = False) -> int:
    """The machines of this fleet: their health, marks, policy and cards.

    Parameters
    ----------
    json
        Print the machines as JSON.
    """

    listing = bootstrap.plane().machines.listing()
    if json:
        print(to_json(listing))
        return 0
    print("\n".join(fleet_lines(listing)))
    return 0


def fleet_lines(listing: FleetListing) -> list[str]:
    """``fleet list`` for a person: the plane, the policy, a row per machine, health notes."""
    rows = [
        (
            m.machine + (" (control plane)" if m.control_plane else ""),
            m.health,
            "yes" if m.drained else "no",
            "yes" if m.upgrading else "no",
            m.policy + (" (own)" if m.policy_from == "its own override" else ""),
            {None: "-", True: "yes", False: "no"}[m.simulated],
            gpus_text(m),
        )
        for m in listing.machines
    ]
    lines = [
        f"plane: {listing.plane}",
        f"fleet policy: {listing.fleet_policy} (new placements only)",
        table(("MACHINE", "HEALTH", "DRAINED", "UPGRADING", "POLICY", "SIMULATED", "GPUS"), rows),
    ]
    notes = [
        f"  {m.machine}: {m.health_sentence}"
        for m in listing.machines
        if m.health_sentence and m.health != "reporting"
    ]
    return lines + (["health:", *notes] if notes else [])


def gpus_text(machine: MachineView) -> str:
    """The GPUS column: each card, its size and who holds it."""
    if machine.reported_at is None:
        return "no agent report yet"
    parts = [
        f"{g.uuid} ({size(g.total_bytes)}, {'held by ' + g.held_by if g.held_by else 'free'})"
        for g in machine.gpus
    ]
    return ", ".join(parts) or "none"


def report_refusal(refusal: Refusal) -> int:
    """Print a refusal's kind, code and sentence to stderr; the exit code of a refusal."""
    print(
        f"refused ({refusal.kind.value}): {refusal.code.value}: {refusal.sentence}",
        file=sys.stderr,
    )
    return REFUSED


def refuse_a_file(model: str) -> None:
    """``nodeau run ./file.gguf``: a file is imported first, then run by its alias."""

    looks_like_a_path = "/" in model or model.lower().endswith(".gguf")
    if looks_like_a_path or (model.startswith(("~", ".")) and Path(model).expanduser().is_file()):
        raise SettingsError(
            f"{model} is a file, and a model is run by its name: "
            f"`nodeau models import {model} --alias NAME`, then `nodeau run NAME`"
        )
