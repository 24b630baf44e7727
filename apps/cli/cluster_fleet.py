"""``nodeau fleet list`` on a fleet on Kubernetes: every machine, as Nodeau sees it.

Decisions recorded here:

* A machine is a Node. Its health is the controller's last assessment (ConfigMap
  ``nodeau-health``), never re-assessed here: two commands must not disagree
  about a machine because their clocks did. A Node the controller has not
  assessed yet says ``not yet assessed``.
* Its GPUs are those of its agent's latest report; which card is held by which
  workload comes from the reservation ledger, the authority for what each card
  holds. A machine whose agent has not reported shows no cards and says so.
* The drained mark and the policy that applies to it (the fleet's or its own
  override) are shown beside each machine; the first line names the plane.
"""

from __future__ import annotations

from typing import Any

from nodeau.adapters.kube.health_store import read_health
from nodeau.adapters.kube.marks import read_ledger, read_marks
from nodeau.adapters.kube.report_form import MachineReport
from nodeau.adapters.kube.reports import read_reports
from nodeau.apps.cli.cluster_plane import banner, open_cluster
from nodeau.apps.cli.render import size, table, to_json
from nodeau.domain.health import Health, MachineHealth
from nodeau.domain.reservations import Ledger

NOT_ASSESSED = "not yet assessed"
NO_REPORT = "no agent report yet"


def gpu_cells(report: MachineReport | None, ledger: Ledger) -> list[dict[str, Any]]:
    """Each reported card with its size and the workload holding it (per the ledger)."""
    if report is None:
        return []
    cells = []
    for reading in report.reading.gpus:
        holder = ledger.holder(reading.gpu.uuid)
        cells.append(
            {
                "uuid": reading.gpu.uuid,
                "model": reading.gpu.model,
                "total_bytes": reading.gpu.total_bytes,
                "held_by": None if holder is None else holder.workload,
                "reserved_bytes": ledger.reserved_bytes(reading.gpu.uuid),
            }
        )
    return cells


def machines(api: Any) -> tuple[str, list[dict[str, Any]]]:
    """The fleet policy, and one entry per Node with health, cards, marks and policy."""
    marks = read_marks(api)
    health: dict[str, MachineHealth] = dict(read_health(api))
    reports = {report.machine: report for report in read_reports(api)}
    ledger = read_ledger(api)
    overrides = dict(marks.settings.overrides)
    out = []
    for name in marks.nodes:
        assessed = health.get(name)
        report = reports.get(name)
        out.append(
            {
                "machine": name,
                "health": NOT_ASSESSED if assessed is None else assessed.state.value,
                "health_since": None if assessed is None else assessed.since,
                "health_sentence": None if assessed is None else assessed.sentence,
                "drained": name in marks.drained,
                "upgrading": name in marks.upgrading,
                "control_plane": name in marks.control_plane,
                "policy": marks.settings.policy_for(name).value,
                "policy_from": "its own override" if name in overrides else "the fleet policy",
                "simulated": None if report is None else report.reading.simulated,
                "reported_at": None if report is None else report.at,
                "gpus": gpu_cells(report, ledger),
            }
        )
    return marks.settings.fleet_policy.value, out


def gpus_text(entry: dict[str, Any]) -> str:
    """The GPUS column: each card, its size and who holds it."""
    if entry["reported_at"] is None:
        return NO_REPORT
    parts = [
        f"{g['uuid']} ({size(g['total_bytes'])}, "
        f"{'held by ' + g['held_by'] if g['held_by'] else 'free'})"
        for g in entry["gpus"]
    ]
    return ", ".join(parts) or "none"


def fleet_list(*, json: bool) -> int:
    """The machines of the fleet on Kubernetes."""
    connection = open_cluster()
    plane = banner(connection.server, connection.context).removeprefix("nodeau: ")
    fleet_policy, entries = machines(connection.api)
    if json:
        print(to_json({"plane": plane, "fleet_policy": fleet_policy, "machines": entries}))
        return 0
    print(f"plane: {plane}")
    print(f"fleet policy: {fleet_policy} (new placements only)")
    rows = [
        (
            e["machine"] + (" (control plane)" if e["control_plane"] else ""),
            e["health"],
            "yes" if e["drained"] else "no",
            e["policy"] + (" (own)" if e["policy_from"] == "its own override" else ""),
            {None: "-", True: "yes", False: "no"}[e["simulated"]],
            gpus_text(e),
        )
        for e in entries
    ]
    print(table(("MACHINE", "HEALTH", "DRAINED", "POLICY", "SIMULATED", "GPUS"), rows))
    notes = [
        f"  {e['machine']}: {e['health_sentence']}"
        for e in entries
        if e["health_sentence"] and e["health"] != Health.REPORTING.value
    ]
    if notes:
        print("\n".join(["health:", *notes]))
    return 0
