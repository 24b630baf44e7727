"""The reporter: a connected fleet's reports and operation polls, on a schedule.

Why it is so: docs/adr/decisions/apps-cloud.md (reporter.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from functools import partial

import attrs

from nodeau.apps.cloud.settings import CloudSettings
from nodeau.apps.planes.plane import Plane
from nodeau.domain.cloud import (
    Association,
    OperationDecision,
    OperationKind,
    OperationRecord,
    decide_operation,
    due,
    metadata_report,
    next_due,
)
from nodeau.ports.cloud import CloudError, CloudState, NodeauCloud
from nodeau.ports.errors import NodeauError


def report(plane: Plane, cloud: NodeauCloud, association: Association, now: datetime) -> None:
    """Send one report of the plane's machines and workloads."""
    machines = [attrs.asdict(m) for m in plane.machines.listing().machines]
    workloads = [attrs.asdict(w) for w in plane.serving.workloads()]
    body = metadata_report(association.installation_id, machines, workloads, now)
    cloud.send_report(association, body)


def carry_out(plane: Plane, decision: OperationDecision) -> str:
    """Do an allowed operation through the plane; the plane's sentence."""
    target = decision.operation.target
    match decision.kind:
        case OperationKind.DRAIN:
            return plane.machines.drain(target)
        case OperationKind.UNDRAIN:
            return plane.machines.undrain(target)
        case OperationKind.STOP_BATCH:
            return plane.batches.stop(target)
        case OperationKind.STOP_SERVICE:
            return plane.serving.stop(target, workload=True)
        case None:
            raise ValueError("only an allowed operation is carried out")


def handle_operations(
    plane: Plane,
    cloud: NodeauCloud,
    state: CloudState,
    association: Association,
    clock: Callable[[], datetime],
) -> tuple[OperationRecord, ...]:
    """Ask for operations, decide each, carry out the allowed ones, record and answer all."""
    done = {r.id: r for r in state.operations()}
    handled = []
    for operation in cloud.operations(association):
        record = done.get(operation.id)
        if record is None:
            decision = decide_operation(operation, association.allowed)
            outcome, sentence = "refused", decision.sentence
            if decision.allowed:
                try:
                    outcome, sentence = "done", carry_out(plane, decision)
                except NodeauError as exc:
                    outcome, sentence = "failed", exc.one_line()
            record = OperationRecord(
                at=clock(),
                id=operation.id,
                kind=operation.kind,
                target=operation.target,
                verdict=decision.verdict,
                outcome=outcome,
                sentence=sentence,
            )
            state.record_operation(record)
            done[operation.id] = record
        handled.append(record)
        cloud.send_outcome(association, record)
    return tuple(handled)


def run(
    plane: Plane,
    cloud_for: Callable[[Association], NodeauCloud],
    state: CloudState,
    settings: CloudSettings,
    clock: Callable[[], datetime],
    stop: threading.Event,
    log: Callable[[str], None],
    *,
    once: bool = False,
) -> None:
    """Report and poll on the schedule until ``stop`` is set or the association is gone."""
    last_report: datetime | None = None
    last_poll: datetime | None = None
    while not stop.is_set():
        association = state.association()
        if association is None or not association.fleet:
            log("not connected as a fleet (nodeau cloud connect --fleet); the reporter ends")
            return
        cloud = cloud_for(association)
        now = clock()
        if due(last_report, settings.report_interval, now):
            last_report = now
            _attempt(log, "report", partial(report, plane, cloud, association, now))
        if due(last_poll, settings.poll_interval, now):
            last_poll = now
            polled = partial(handle_operations, plane, cloud, state, association, clock)
            _attempt(log, "operations", polled)
        if once:
            return
        now = clock()
        wake = min(
            next_due(last_report, settings.report_interval, now),
            next_due(last_poll, settings.poll_interval, now),
        )
        stop.wait(max((wake - now).total_seconds(), 0.0))


def _attempt(log: Callable[[str], None], what: str, action: Callable[[], object]) -> None:
    try:
        action()
    except CloudError as exc:
        log(f"{what}: {exc.one_line()} (nothing here changed; next turn as scheduled)")
    except NodeauError as exc:
        log(f"{what}: {exc.one_line()}")
