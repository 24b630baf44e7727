"""What the page shows, read through the same ``Plane`` the CLI uses and printed with the
CLI's own row and sentence helpers, so the page says what the commands say, figure for
figure.

Decisions:

* One document (``read_board``) per poll: every section read at one moment, each with the
  CLI's table headers and rows (``ps``, ``batch status``, ``fleet list``, ``model status``,
  ``models copies``, ``recovery status``, ``plan``), and under ``cli`` the very JSON those
  commands print with ``--json`` (the CLI's converter), so a program or a test can compare
  the two.
* A section that cannot be read (a cluster that does not answer, copies on one machine)
  says why in one line (``notes``) and the rest of the page is still shown. A figure a plane
  cannot know (``None``) is shown as "unknown", never as an error (gpustack #4062: a page
  that crashed on a null metric).
* Alerts are derived from the same views (``alerts``).
* The plan is read without advancing its clock anchor (``plane.plan(advance=False)``): a
  poll every 2 s only shows it, and only ``nodeau plan``'s commands move the anchor, as a
  decision that reads the plan does not.
* Models also carry each model's qualification per capability, in ``nodeau model info``'s
  words (``qualification``), with that command's JSON of it under ``cli.model_info``.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from attrs import frozen

from nodeau.apps.cli import batch, copies, ps_command, recovery
from nodeau.apps.cli.plan import plan_lines
from nodeau.apps.cli.render import size, to_json
from nodeau.apps.cli.serving import fleet_lines
from nodeau.apps.cli.status_rows import StatusRow
from nodeau.apps.dashboard.alerts import alerts
from nodeau.apps.dashboard.qualification import ModelQualification
from nodeau.apps.planes.plane import (
    BatchView,
    CopyListing,
    FleetListing,
    MachineView,
    Plane,
    PlanView,
    RecoveryListing,
    WorkloadView,
)
from nodeau.ports.errors import NodeauError

log = logging.getLogger("nodeau.dashboard")

UNKNOWN = "unknown"
MODEL_HEADERS = ("MACHINE", "MODEL", "ARTIFACT", "SIZE", "DOWNLOADED", "VERIFIED")
GPU_HEADERS = ("GPU", "MODEL", "TOTAL", "HELD BY", "RESERVED")
QUALIFICATION_HEADERS = ("MODEL", "ARTIFACT", "QUALIFIED")
FINISHED_BATCH = frozenset({"succeeded", "failed", "stopped"})

T = TypeVar("T")
Json = dict[str, Any]


def known(value: object) -> str:
    """A figure as text; one the plane does not know is "unknown"."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def cli_json(value: object) -> Any:
    """``value`` exactly as the CLI's ``--json`` prints it."""
    return json.loads(to_json(value))


def machine_card(m: MachineView) -> Json:
    """One machine: its facts, its health sentence and a row per GPU."""
    policy = m.policy + (" (own)" if m.policy_from == "its own override" else "")
    return {
        "machine": m.machine,
        "health": m.health,
        "sentence": m.health_sentence,
        "facts": [
            ["health", known(m.health)],
            ["drained", known(m.drained)],
            ["upgrading", known(m.upgrading)],
            ["control plane", known(m.control_plane)],
            ["policy", policy],
            ["simulated", known(m.simulated)],
            ["last report", known(m.reported_at)],
        ],
        "gpus": {
            "headers": GPU_HEADERS,
            "rows": [
                [
                    g.uuid + (" (simulated)" if m.simulated else ""),
                    known(g.model),
                    size(g.total_bytes) if g.total_bytes is not None else UNKNOWN,
                    g.held_by or "free",
                    size(g.reserved_bytes) if g.held_by and g.reserved_bytes is not None else "-",
                ]
                for g in m.gpus
            ],
        },
    }


def model_row(r: StatusRow) -> tuple[str, ...]:
    """One line of ``nodeau model status``."""
    return (
        r.machine,
        ", ".join(r.names) or "-",
        r.sha256[:12],
        size(r.size_bytes),
        r.downloaded,
        r.verified,
    )


def qualification_section(models: Sequence[ModelQualification]) -> Json:
    """A row per model: its names, artifact, when it was qualified, then each capability's
    state as ``nodeau model info`` prints it (its evidence beside it, for the page's title)."""
    capabilities = [c.capability.value for c in models[0].capabilities] if models else []
    return {
        "headers": [*QUALIFICATION_HEADERS, *capabilities],
        "rows": [
            [", ".join(m.names) or "-", m.artifact[:12], m.qualified or "never",
             *(c.state for c in m.capabilities)]
            for m in models
        ],
        "evidence": [["", "", "", *(c.evidence for c in m.capabilities)] for m in models],
    }  # fmt: skip


def model_info_json(m: ModelQualification) -> Json:
    """What ``nodeau model info --json`` says of the model's qualification."""
    return {
        "names": list(m.names),
        "artifact_id": m.artifact,
        "qualified": m.qualified,
        "capabilities": cli_json(m.capabilities),
    }


@frozen
class Encoded:
    """The board as the data route sends it: serialised, and gzipped, once per read (on a
    fleet of 500 workloads it is about 1.5 MB of JSON, a tenth of that gzipped)."""

    json: bytes
    gzip: bytes


def encoded(document: Json) -> Encoded:
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    return Encoded(json=raw, gzip=gzip.compress(raw, compresslevel=5, mtime=0))


class Reading:
    """Each view read once, what failed said in one line."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}

    def read(self, section: str, how: Callable[[], T]) -> T | None:
        try:
            return how()
        except NodeauError as exc:
            self.notes[section] = exc.one_line()
        except Exception as exc:  # a bug: logged with its traceback, the page still shown
            log.exception("reading %s for the dashboard failed", section)
            self.notes[section] = f"could not be read ({type(exc).__name__}: {exc})"
        return None


def read_board(
    plane: Plane,
    model_rows: Callable[[], Sequence[StatusRow]],
    now: datetime,
    qualifications: Callable[[], Sequence[ModelQualification]] = tuple,
) -> Json:
    """The page's document: every section, the alerts, and the CLI's JSON of each view."""
    r = Reading()
    machines: FleetListing | None = r.read("hardware", plane.machines)
    workloads: tuple[WorkloadView, ...] | None = r.read("workloads", plane.workloads)
    batches: tuple[BatchView, ...] | None = r.read("batches", lambda: plane.batches(None))
    files: Sequence[StatusRow] | None = r.read("models", model_rows)
    copy_listing: CopyListing | None = r.read("copies", plane.copies)
    recovering: RecoveryListing | None = r.read("recovery", plane.recovery)
    qualified: Sequence[ModelQualification] | None = r.read("qualification", qualifications)
    plan: PlanView | None = r.read("plan", lambda: plane.plan(advance=False))
    found = alerts(
        machines=machines, workloads=workloads, copies=copy_listing, files=files, plan=plan
    )
    return {
        "plane": plane.description,
        "read_at": now.isoformat(),
        "alerts": cli_json(found),
        "notes": r.notes,
        "hardware": None
        if machines is None
        else {
            "plane": machines.plane,
            "fleet_policy": machines.fleet_policy,
            "machines": [machine_card(m) for m in machines.machines],
            "lines": fleet_lines(machines),
        },
        "workloads": None
        if workloads is None
        else {
            "headers": ps_command.HEADERS,
            "rows": [ps_command.row(w) for w in workloads],
            "names": [w.name for w in workloads],
        },
        "batches": None
        if batches is None
        else {
            "headers": batch.STATUS_HEADERS,
            "rows": [batch.status_row(b) for b in batches],
            "stoppable": [b.name for b in batches if b.state not in FINISHED_BATCH],
        },
        "models": None
        if files is None
        else {"headers": MODEL_HEADERS, "rows": [model_row(f) for f in files]},
        "qualification": None if qualified is None else qualification_section(qualified),
        "copies": None
        if copy_listing is None
        else {
            "headers": copies.HEADERS,
            "rows": [copies.row(c) for c in copy_listing.copies],
            "lines": copies.listing_lines(copy_listing)[1:],
        },
        "recovery": None
        if recovering is None
        else {
            "headers": recovery.HEADERS,
            "rows": [recovery.row(v) for v in recovering.services],
            "lines": recovery.status_lines(recovering),
        },
        "plan": None if plan is None else {"lines": plan_lines(plan), "plan": plan.plan},
        "cli": {
            "ps": None if workloads is None else cli_json(workloads),
            "batch_status": None if batches is None else cli_json(batches),
            "fleet_list": None if machines is None else cli_json(machines),
            "model_status": None if files is None else cli_json(files),
            "model_info": None if qualified is None else [model_info_json(m) for m in qualified],
            "models_copies": None if copy_listing is None else cli_json(copy_listing),
            "recovery_status": None if recovering is None else cli_json(recovering),
            "plan": None if plan is None else cli_json(plan),
        },
    }
