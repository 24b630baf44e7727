"""The dashboard's alerts: derived from the same views the CLI prints, never computed apart.

Why it is so: docs/adr/decisions/apps-dashboard.md (alerts.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attrs import frozen

from nodeau.apps.copies.commands import CopyListing
from nodeau.apps.machines.commands import FleetListing
from nodeau.apps.planes.status_rows import StatusRow
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.plans.commands import PlanView
from nodeau.domain.cache import CopyState

SEVERITIES = ("error", "warning")


@frozen(kw_only=True)
class Alert:
    kind: str  # e.g. "machine-unreachable", "workload-held", "copy-failed"
    severity: str  # "error" or "warning"
    subject: str  # the machine, workload, copy or file it is about
    sentence: str


def machine_alerts(listing: FleetListing | None) -> tuple[Alert, ...]:
    if listing is None:
        return ()
    return tuple(
        Alert(
            kind=f"machine-{m.health}",
            severity="error" if m.health == "unreachable" else "warning",
            subject=m.machine,
            sentence=m.health_sentence or f"{m.machine} is {m.health}",
        )
        for m in listing.machines
        if m.health in ("degraded", "unreachable")
    )


_WORKLOAD_SEVERITY = {"held": "error", "exited": "error", "restarting": "warning"}


def workload_alerts(workloads: Sequence[WorkloadView] | None) -> tuple[Alert, ...]:
    return tuple(
        Alert(
            kind=f"workload-{w.state}",
            severity=_WORKLOAD_SEVERITY[w.state],
            subject=w.name,
            sentence=w.sentence,
        )
        for w in workloads or ()
        if w.state in _WORKLOAD_SEVERITY
    )


def copy_alerts(listing: CopyListing | None) -> tuple[Alert, ...]:
    if listing is None:
        return ()
    return tuple(
        Alert(
            kind="copy-failed",
            severity="error",
            subject=f"{c.machine}/{c.model}",
            sentence=c.sentence,
        )
        for c in listing.copies
        if c.state == "failed"
    )


def file_alerts(rows: Iterable[StatusRow] | None) -> tuple[Alert, ...]:
    return tuple(
        Alert(
            kind="verification-mismatch",
            severity="error",
            subject=f"{r.machine}/{', '.join(r.names) or r.sha256[:12]}",
            sentence=(
                f"{r.sha256[:12]} on {r.machine}: {r.verified} (its bytes do not hash to its "
                f"SHA-256; nodeau model verify re-reads it)"
            ),
        )
        for r in rows or ()
        if r.state is CopyState.MISMATCH
    )


def plan_alerts(plan: PlanView | None) -> tuple[Alert, ...]:
    if plan is None:
        return ()
    found: list[Alert] = []
    if plan.warning:
        found.append(
            Alert(
                kind="entitlement-expiring",
                severity="warning",
                subject=plan.plan,
                sentence=plan.warning,
            )
        )
    if not plan.accepted and plan.reason != "none-present":
        found.append(
            Alert(
                kind=f"entitlement-{plan.reason}",
                severity="error",
                subject=plan.plan,
                sentence=plan.sentence,
            )
        )
    elif plan.clock_moved_back:
        found.append(
            Alert(
                kind="entitlement-clock-moved-back",
                severity="error",
                subject=plan.plan,
                sentence=plan.sentence,
            )
        )
    return tuple(found)


def alerts(
    *,
    machines: FleetListing | None,
    workloads: Sequence[WorkloadView] | None,
    copies: CopyListing | None,
    files: Iterable[StatusRow] | None,
    plan: PlanView | None,
) -> tuple[Alert, ...]:
    """Every alert the views give, errors before warnings (otherwise in the views' order)."""
    found = (
        *machine_alerts(machines),
        *workload_alerts(workloads),
        *copy_alerts(copies),
        *file_alerts(files),
        *plan_alerts(plan),
    )
    return tuple(sorted(found, key=lambda a: SEVERITIES.index(a.severity)))
