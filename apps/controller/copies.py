"""Recovery's copies: each service set to recover automatically keeps a verified copy of its
model on another machine that could run it, so a recovery starts without a download.

Why it is so: docs/adr/decisions/apps-controller.md (copies.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from attrs import evolve
from returns.result import Success

from nodeau.apps.controller.reading import FleetInputs
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.copies import asker_words
from nodeau.domain.fleet_admission import Planning, fleet_of, planning, still_permitted
from nodeau.domain.records import Snapshot
from nodeau.domain.recovery import (
    CopyNeed,
    copy_asks,
    copy_need,
    copy_target,
    machines_that_fit,
)
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, holds_gpu
from nodeau.ports.cluster import ModelCopies
from nodeau.ports.state import WorkloadRecord

LOOK_AGAIN = timedelta(minutes=5)  # even when nothing it depends on changed


class CopyKeeper:
    """Asks for (and takes back) the copies services' recoveries rely on."""

    def __init__(
        self,
        *,
        copies: ModelCopies,
        clock: Callable[[], datetime],
        log: Callable[[str], None],
    ) -> None:
        self._copies = copies
        self._clock = clock
        self._log = log
        self._seen: object = None  # what the last look depended on
        self._looked: datetime | None = None

    def keep(self, snapshot: Snapshot, inputs: FleetInputs) -> None:
        """Ask for and take back recovery's copies, when anything they depend on changed
        since the last look (or ``LOOK_AGAIN`` passed): the services set to recover
        automatically and where they are, the machines' health and marks, and which
        machine reports which verified artifacts."""
        relying = tuple(r for r in snapshot.workloads if relies_on_a_copy(r))
        now = self._clock()
        seen = fingerprint(relying, inputs)
        if seen == self._seen and self._looked is not None and now - self._looked < LOOK_AGAIN:
            return
        self._seen, self._looked = seen, now
        fleet = fleet_of(inputs.reports, inputs.marks)
        plans: dict[tuple[str, object, object], tuple[Planning, frozenset[str]] | None] = {}
        needs: dict[str, tuple[CopyNeed, WorkloadRecord, Planning]] = {}
        for record in relying:
            ask = ask_of(record)
            key = (ask.model, ask.task, ask.context_tokens)  # the same for every name
            if key not in plans:
                plan = planning(
                    ask, reports=inputs.reports, marks=inputs.marks, health=inputs.health,
                    fleet=fleet, plan=inputs.plan, organisation=inputs.organisation,
                    table=inputs.table, cuda_image=inputs.cuda_image,
                ).bind(lambda found: still_permitted(found, inputs.organisation))  # fmt: skip
                found = plan.unwrap() if isinstance(plan, Success) else None
                plans[key] = (
                    None
                    if found is None
                    else (found, machines_that_fit(found.view(snapshot.ledger)))
                )
            known = plans[key]
            if known is None:
                continue
            found, fits = known
            need = copy_need(record.workload, fits, found.view(snapshot.ledger))
            if need is not None:
                needs[need.workload] = (need, record, found)

        def target(need: CopyNeed) -> str | None:
            _, record, found = needs[need.workload]
            request = evolve(found.request, workload=record.workload.name)
            return copy_target(record.workload, request, found.view(snapshot.ledger))

        asks = copy_asks((n for n, _, _ in needs.values()), self._copies.requests(), target)
        now = self._clock()
        for machine, artifact, name, asker in asks.add:
            self._copies.request(machine, artifact, name, asker, now)
            self._log(f"copy of {name} asked of {machine} for {asker_words(asker)}")
        for machine, artifact, asker in asks.withdraw:
            self._copies.withdraw(machine, artifact, asker)
            self._log(f"copy of {artifact[:12]} on {machine}: {asker_words(asker)} no longer asks")


def fingerprint(relying: tuple[WorkloadRecord, ...], inputs: FleetInputs) -> object:
    """What recovery's copies depend on, comparable between passes."""
    return (
        tuple((r.workload.name, r.workload.machine, r.workload.artifact_id) for r in relying),
        tuple(sorted((m, h.state) for m, h in inputs.health.items())),
        inputs.marks,
        tuple(
            (rep.reading.machine, tuple(sorted(a.id for a in rep.artifacts)))
            for rep in inputs.reports
        ),
        inputs.table,
    )


def relies_on_a_copy(record: WorkloadRecord) -> bool:
    w = record.workload
    return (
        w.kind is WorkloadKind.SERVICE
        and w.recovery_mode is RecoveryMode.AUTOMATIC
        and holds_gpu(w.state)
    )


def ask_of(record: WorkloadRecord) -> WorkloadAsk:
    """The workload as admission plans it: its bytes, task and context as admitted."""
    w = record.workload
    return WorkloadAsk(
        kind=w.kind,
        name=w.name,
        model=w.artifact_id,
        task=record.config.task,
        context_tokens=record.config.context_tokens,
        recovery=w.recovery_mode,
        recovery_after=w.recovery_after,
    )
