"""What the page shows, read through the same ``Plane`` the CLI uses and printed with the
CLI's own row and sentence helpers, so the page says what the commands say, figure for
figure.

Why it is so: docs/adr/decisions/apps-dashboard.md (board.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from attrs import field, frozen

from nodeau.apps.batches.commands import BatchView
from nodeau.apps.cli import batch, copies, ps_command, recovery
from nodeau.apps.cli.plan import plan_lines
from nodeau.apps.cli.render import size, to_json
from nodeau.apps.copies.commands import CopyListing
from nodeau.apps.dashboard import traffic
from nodeau.apps.dashboard.alerts import Alert, alerts
from nodeau.apps.dashboard.cards import CardReadings, card_memory, card_readings, reading_line
from nodeau.apps.dashboard.qualification import ModelQualification
from nodeau.apps.dashboard.traffic import Traffic, read_traffic
from nodeau.apps.machines.commands import FleetListing, MachineView
from nodeau.apps.planes.plane import Plane
from nodeau.apps.planes.status_rows import StatusRow
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.plans.commands import PlanView
from nodeau.apps.recovery.commands import RecoveryListing
from nodeau.domain.hardware import MachineReading
from nodeau.ports.endpoints import MetricsTexts
from nodeau.ports.errors import NodeauError

log = logging.getLogger("nodeau.dashboard")

UNKNOWN = "unknown"
MODEL_HEADERS = ("MACHINE", "MODEL", "ARTIFACT", "SIZE", "DOWNLOADED", "VERIFIED")
GPU_HEADERS = ("GPU", "MODEL", "TOTAL", "HELD BY", "RESERVED")
QUALIFICATION_HEADERS = ("MODEL", "ARTIFACT", "QUALIFIED")
FINISHED_BATCH = frozenset({"succeeded", "failed", "stopped"})
RECOVERY_TABLE_LINE = 2  # recovery.status_lines: the plane, the deciding machine, the table

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


def machine_card(m: MachineView, readings: CardReadings | None = None) -> Json:
    """One machine: its facts, its health sentence, a row per GPU and the figures of each
    GPU's memory bar, with the line saying where its in-use reading comes from."""
    readings = readings or CardReadings()
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
            "memory": card_memory(m, readings),
        },
        "reading": reading_line(m, readings),
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


@frozen(kw_only=True)
class Views:
    """Every view of one read, as the plane and this machine's files gave them (None: the
    section could not be read; ``notes`` says why)."""

    plane: str
    read_at: datetime
    notes: dict[str, str]
    alerts: tuple[Alert, ...]
    machines: FleetListing | None
    workloads: tuple[WorkloadView, ...] | None
    batches: tuple[BatchView, ...] | None
    files: Sequence[StatusRow] | None
    copies: CopyListing | None
    recovering: RecoveryListing | None
    qualified: Sequence[ModelQualification] | None
    plan: PlanView | None
    traffic: tuple[Traffic, ...] | None = None
    cards: CardReadings = field(factory=CardReadings)  # what this machine's cards report


def no_reading() -> MachineReading | None:
    """No card of this machine is read (a board made without a reader of them)."""
    return None


def read_views(
    plane: Plane,
    model_rows: Callable[[], Sequence[StatusRow]],
    now: datetime,
    qualifications: Callable[[], Sequence[ModelQualification]] = tuple,
    cards: Callable[[], MachineReading | None] = no_reading,
    metrics: MetricsTexts | None = None,
) -> Views:
    """Every view the page shows, each read once; the alerts derived from them; ``cards``
    reads this machine's cards (what each reports in use), ``metrics`` the endpoints'
    counters (None: the Traffic table is not read)."""
    r = Reading()
    # a reading that fails is said on each card it leaves without a figure, not as a section
    cards_read = Reading()
    reading: MachineReading | None = cards_read.read("cards", cards)
    machines: FleetListing | None = r.read("hardware", plane.machines.listing)
    workloads: tuple[WorkloadView, ...] | None = r.read("workloads", plane.serving.workloads)
    batches: tuple[BatchView, ...] | None = r.read("batches", lambda: plane.batches.status(None))
    files: Sequence[StatusRow] | None = r.read("models", model_rows)
    copy_listing: CopyListing | None = r.read("copies", plane.copies.listing)
    recovering: RecoveryListing | None = r.read("recovery", plane.recovery.status)
    qualified: Sequence[ModelQualification] | None = r.read("qualification", qualifications)
    plan: PlanView | None = r.read("plan", lambda: plane.plans.in_force(advance=False))
    served: tuple[Traffic, ...] | None = (
        None
        if metrics is None
        else r.read("traffic", lambda: read_traffic(workloads or (), metrics))
    )
    found = alerts(
        machines=machines, workloads=workloads, copies=copy_listing, files=files, plan=plan
    )
    return Views(
        plane=plane.description,
        read_at=now,
        notes=r.notes,
        alerts=found,
        machines=machines,
        workloads=workloads,
        batches=batches,
        files=files,
        copies=copy_listing,
        recovering=recovering,
        qualified=qualified,
        plan=plan,
        traffic=served,
        cards=card_readings(reading, cards_read.notes.get("cards")),
    )


def playground_targets(workloads: Sequence[WorkloadView]) -> list[str]:
    """The services the Playground can ask: serving, with an endpoint on this machine."""
    return [
        w.name for w in workloads if w.kind == "service" and w.endpoint and w.state == "serving"
    ]


def page_board(v: Views) -> Json:
    """What the page shows: every section's headers, rows and lines, and the alerts."""
    machines, workloads, batches, files = v.machines, v.workloads, v.batches, v.files
    copy_listing, recovering, qualified, plan = v.copies, v.recovering, v.qualified, v.plan
    return {
        "plane": v.plane,
        "read_at": v.read_at.isoformat(),
        "alerts": cli_json(v.alerts),
        "notes": v.notes,
        "hardware": None
        if machines is None
        else {
            "plane": machines.plane,
            "fleet_policy": machines.fleet_policy,
            "machines": [machine_card(m, v.cards) for m in machines.machines],
        },
        "workloads": None
        if workloads is None
        else {
            "headers": ps_command.HEADERS,
            "rows": [ps_command.row(w) for w in workloads],
            "targets": playground_targets(workloads),
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
            "lines": copies.listing_lines(copy_listing)[1:],  # what follows the table
        },
        "recovery": None
        if recovering is None
        else {
            "headers": recovery.HEADERS,
            "rows": [recovery.row(s) for s in recovering.services],
            # what follows the plane, the deciding machine and the table
            "lines": recovery.status_lines(recovering)[RECOVERY_TABLE_LINE + 1 :],
        },
        "plan": None if plan is None else {"lines": plan_lines(plan), "plan": plan.plan},
        "traffic": None
        if v.traffic is None
        else {"headers": traffic.HEADERS, "rows": [traffic.row(t) for t in v.traffic]},
    }


def cli_views(v: Views) -> Json:
    """Each view exactly as its command prints it with ``--json``."""
    return {
        "ps": None if v.workloads is None else cli_json(v.workloads),
        "batch_status": None if v.batches is None else cli_json(v.batches),
        "fleet_list": None if v.machines is None else cli_json(v.machines),
        "model_status": None if v.files is None else cli_json(v.files),
        "model_info": None if v.qualified is None else [model_info_json(m) for m in v.qualified],
        "models_copies": None if v.copies is None else cli_json(v.copies),
        "recovery_status": None if v.recovering is None else cli_json(v.recovering),
        "plan": None if v.plan is None else cli_json(v.plan),
    }


def read_board(
    plane: Plane,
    model_rows: Callable[[], Sequence[StatusRow]],
    now: datetime,
    qualifications: Callable[[], Sequence[ModelQualification]] = tuple,
    cards: Callable[[], MachineReading | None] = no_reading,
) -> Json:
    """The whole document: what the page shows, and under ``cli`` the CLI's JSON of each
    view, from one read."""
    views = read_views(plane, model_rows, now, qualifications, cards)
    return {**page_board(views), "cli": cli_views(views)}
