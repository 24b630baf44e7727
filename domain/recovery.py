"""Recovery: what happens to each workload when its machine stops answering.

Why it is so: docs/adr/decisions/domain.md (recovery.py).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from attrs import evolve, frozen
from returns.result import Failure, Success

from nodeau.domain.admission import AdmissionRequest
from nodeau.domain.card_shares import split_for
from nodeau.domain.copies import RECOVERY_PREFIX, CopyRequest, recovery_asker
from nodeau.domain.hardware import Fleet
from nodeau.domain.health import Health, MachineHealth, unreachable_for
from nodeau.domain.placement import Placement
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.refusals import ReasonCode, Refusal, RefusalKind
from nodeau.domain.reservations import Ledger, release
from nodeau.domain.scheduling import FleetView, admit_and_place, files_target
from nodeau.domain.workloads import (
    HELD_REASON_FITS,
    HeldReason,
    Recovery,
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
    holds_gpu,
)


class RecoveryAction(str, enum.Enum):
    """What the control plane does for a workload now."""

    NOTHING = "nothing"
    RESUME = "resume"  # its own machine answers again; it was never moved
    HOLD = "hold"
    RECOVER = "recover"


@frozen(kw_only=True)
class RecoveryDecision:
    """One decision for one workload, with the reason a person reads."""

    workload: str
    action: RecoveryAction
    held_reason: HeldReason | None = None
    placement: Placement | None = None
    fetch_copy_to: str | None = None
    fires_at: datetime | None = None
    refusal: Refusal | None = None
    sentence: str


def held(w: Workload, reason: HeldReason, sentence: str, **extra: object) -> RecoveryDecision:
    return RecoveryDecision(
        workload=w.name,
        action=RecoveryAction.HOLD,
        held_reason=reason,
        sentence=sentence,
        **extra,  # type: ignore[arg-type]
    )


def wait_without_moving(w: Workload) -> RecoveryDecision | None:
    """The cases where an unreachable machine's workload waits whatever the fleet holds."""
    if w.kind is WorkloadKind.BATCH:
        return held(
            w,
            HeldReason.BATCH_JOB,
            f"{w.machine} stopped answering; batch jobs do not recover, {w.name} waits for it",
        )
    if w.recovery_mode is RecoveryMode.NEVER:
        return held(
            w,
            HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
            f"{w.machine} stopped answering; recovery is off, so {w.name} waits for {w.machine}",
        )
    return None


def recovery_due(w: Workload, health: MachineHealth, now: datetime) -> bool:
    """True once the machine has been unreachable for the workload's whole delay."""
    return (
        health.state is Health.UNREACHABLE
        and w.recovery_mode is RecoveryMode.AUTOMATIC
        and unreachable_for(health, now) >= w.recovery_after
    )


def before_placing(
    w: Workload, health: MachineHealth, now: datetime, control_plane: str | None
) -> RecoveryDecision | None:
    """The decision for ``w`` when it is made before any placement is tried (nothing to
    do, it resumes, it waits whatever the fleet holds, or its delay has not passed); None
    when its recovery is due and a placement decides."""
    if not holds_gpu(w.state):
        return RecoveryDecision(
            workload=w.name, action=RecoveryAction.NOTHING, sentence=f"{w.name} holds no card"
        )
    if health.state is not Health.UNREACHABLE:
        return answering(w, health)
    waiting = wait_without_moving(w)
    if waiting is not None:
        return waiting
    if control_plane is not None and w.machine == control_plane:
        return held(
            w,
            HeldReason.ON_CONTROL_PLANE_MACHINE,
            f"{w.machine} is the control-plane machine, which makes the decision; "
            f"{w.name} waits for it",
        )
    if not recovery_due(w, health, now):
        fires = (health.since or now) + w.recovery_after
        return held(
            w,
            HeldReason.WAITING_FOR_DELAY,
            f"{w.machine} stopped answering; {w.name} recovers automatically at "
            f"{fires:%H:%M:%S} if it is still unreachable then",
            fires_at=fires,
        )
    return None


BY_LIMITS = frozenset({RefusalKind.LIMIT, RefusalKind.QUOTA, RefusalKind.PERMISSION})


def no_plan(w: Workload, refusal: Refusal) -> RecoveryDecision:
    """Held when nothing in the fleet can even be considered for it: the organisation's
    limits or the plan refuse it as it is (a limit, a quota or a permission), or its model
    resolves to no verified copy anywhere, not even the machine it left."""
    reason = HeldReason.LIMITS if refusal.kind in BY_LIMITS else HeldReason.MODEL_FILES
    return held(w, reason, refusal.sentence, refusal=refusal)


def decide_recovery(
    w: Workload,
    request: AdmissionRequest,
    health: MachineHealth,
    now: datetime,
    view: FleetView,
    control_plane: str | None,
) -> RecoveryDecision:
    """What to do now for workload ``w``, whose machine's health is ``health``.

    ``view`` is the fleet as new placements see it; the workload's own machine
    must be among its exclusions while it is unreachable. Its placement is decided on
    the view ``leaving`` gives.
    """
    gate = before_placing(w, health, now, control_plane)
    if gate is not None:
        return gate
    if w.machine not in dict(view.excluded):
        raise ValueError(f"{w.machine} is unreachable but still a candidate in the view")
    view = leaving(view, w.name)
    match admit_and_place(request, view):
        case Failure(Refusal() as refusal):
            return nowhere_to_go(w, request, view, refusal)
        case Success(Placement() as placement):
            pass
    return RecoveryDecision(
        workload=w.name,
        action=RecoveryAction.RECOVER,
        placement=placement,
        sentence=(
            f"{w.machine} has been unreachable for {w.recovery_after}; {w.name} starts on "
            f"{placement.machine} ({', '.join(r.gpu_uuid for r in placement.reservations)}); "
            "its endpoint stays the same"
        ),
    )


def leaving(view: FleetView, workload: str) -> FleetView:
    """The view a recovery of ``workload`` decides on. Where the workload is all its
    machine holds, that machine is left out with its reservation, as the move leaves it:
    the plan's bounds then count it after the machines that report, and its card is never
    a candidate that hides a limit's refusal. Where it holds more, nothing changes."""
    own = view.ledger.of_workload(workload)
    if own is None or any(r.workload != workload for r in view.ledger.on_machine(own.machine)):
        return view
    machines = tuple(m for m in view.fleet.machines if m.name != own.machine)
    return evolve(
        view, fleet=Fleet(machines=machines), ledger=release(view.ledger, workload), cards=None
    )


def answering(w: Workload, health: MachineHealth) -> RecoveryDecision:
    """The machine answers (or is upgrading on purpose): nothing moves."""
    sentence = f"{w.machine} is {health.state.value}; nothing moves"
    was_held = w.held_reason is not None and health.state is not Health.UPGRADING
    return RecoveryDecision(
        workload=w.name,
        action=RecoveryAction.RESUME if was_held else RecoveryAction.NOTHING,
        sentence=(f"{w.machine} answers again; {w.name} was never moved" if was_held else sentence),
    )


def nowhere_to_go(
    w: Workload, request: AdmissionRequest, view: FleetView, refusal: Refusal
) -> RecoveryDecision:
    """Held with its reason and next step; re-decided on an event, never in a loop."""
    if refusal.code is ReasonCode.NO_VERIFIED_COPY:
        target = files_target(request, view)
        if target is not None:
            return held(
                w,
                HeldReason.MODEL_FILES,
                f"no other machine that could run {w.name} has a verified copy; {target} is "
                f"asked to fetch one (a model you imported: import it there), and it moves "
                f"once {target} has checked every file",
                fetch_copy_to=target,
                refusal=refusal,
            )
    if refusal.kind in (RefusalKind.LIMIT, RefusalKind.PERMISSION):
        return held(
            w,
            HeldReason.LIMITS,
            f"the machines that could take {w.name} are outside what the organisation's "
            f"limits or the plan cover ({refusal.code.value}: {refusal.sentence}); it moves "
            "once they cover one (no retries until then)",
            refusal=refusal,
        )
    return held(
        w,
        HeldReason.CAPACITY,
        f"no other machine has a free card that takes {w.name}; it starts when one frees "
        "(no retries until then)",
        refusal=refusal,
    )


def left_behind(server_machine: str, workload_machine: str) -> bool:
    """Whether a workload's server is the one a recovery left on the machine it moved from
    (its record names another machine now): that server is ended, never routed to, and
    nothing is moved back to it."""
    return server_machine != workload_machine


# More than this share of the machines unreachable at once is not believed: a network
# split or the control plane's own trouble looks like that, a fleet of failing machines
# rarely does. Nothing moves then (gpustack #5935 rescheduled a whole fleet at once).
FLEET_QUIET_SHARE = 0.5
FLEET_QUIET_MIN = 2  # one quiet machine is always believed


def fleet_alarm(health: Mapping[str, MachineHealth]) -> str | None:
    """Why nothing moves anywhere now, when most of the fleet is unreachable at once."""
    quiet = sorted(m for m, h in health.items() if h.state is Health.UNREACHABLE)
    if len(quiet) < FLEET_QUIET_MIN or len(quiet) <= len(health) * FLEET_QUIET_SHARE:
        return None
    return (
        f"{len(quiet)} of {len(health)} machines are unreachable at once (more than half): "
        "Nodeau suspects the network or its control plane, not the machines, and moves "
        "nothing until at least half of the fleet answers"
    )


def guarded(decision: RecoveryDecision, w: Workload, alarm: str | None) -> RecoveryDecision:
    """The decision, unless a fleet-wide alarm stops every move: then held, saying why."""
    if alarm is None or decision.action is not RecoveryAction.RECOVER:
        return decision
    return held(w, HeldReason.FLEET_QUIET, alarm)


def recovered(before: Workload, after: Workload, health: MachineHealth, now: datetime) -> Workload:
    """``after`` (the workload admitted and placed elsewhere) as the recovery that moved it:
    recovering on its new card since ``now``, its recovery counted and recorded."""
    if health.state is not Health.UNREACHABLE or health.since is None:
        raise ValueError(f"{before.machine} is {health.state.value}; nothing recovers from it")
    if after.machine == before.machine:
        raise ValueError(f"{before.name} recovers onto another machine than {before.machine}")
    move = Recovery(
        from_machine=before.machine,
        to_machine=after.machine,
        at=now,
        unreachable_since=health.since,
        after=before.recovery_after,
    )
    return evolve(
        after,
        model=before.model,
        state=WorkloadState.RECOVERING,
        since=now,
        recovery_mode=before.recovery_mode,
        recovery_after=before.recovery_after,
        held_reason=None,
        next_step=None,
        recoveries=before.recoveries + 1,
        last_recovery=move,
        restarts=0,
        last_exit=None,
        next_attempt=None,
        crash_streak=0,
    )


def held_as(w: Workload, decision: RecoveryDecision, since: datetime) -> Workload | None:
    """The workload held as ``decision`` says, or None when it is held so already."""
    if decision.action is not RecoveryAction.HOLD or decision.held_reason is None:
        return None
    if w.state is WorkloadState.HELD and w.held_reason is decision.held_reason:
        return None
    return evolve(w, state=WorkloadState.HELD, since=since, held_reason=decision.held_reason)


def with_recovery(w: Workload, mode: RecoveryMode, after: timedelta) -> Workload:
    """The workload with a new recovery choice; nothing else changes (nothing restarts).
    A held workload's reason follows the choice; the next assessment refines it."""
    if w.kind is WorkloadKind.BATCH and mode is not RecoveryMode.NEVER:
        raise ValueError("recovery applies to served workloads, not batch jobs")
    reason = w.held_reason
    if reason is not None and HELD_REASON_FITS[reason][1] is not mode:
        reason = (
            HeldReason.WAITING_FOR_DELAY
            if mode is RecoveryMode.AUTOMATIC
            else HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF
        )
    return evolve(w, recovery_mode=mode, recovery_after=after, held_reason=reason)


def moved_admission(
    admission: Admission, before: WorkloadRecord, health: MachineHealth, now: datetime
) -> Admission:
    """A recovery's admission of ``before`` elsewhere: the workload recovering on its new
    card, known by the name it had, its recovery counted and recorded."""
    w = recovered(before.workload, admission.record.workload, health, now)
    record = evolve(admission.record, workload=w, endpoint_port=before.endpoint_port)
    return evolve(admission, record=record)


def held_record(
    record: WorkloadRecord, decision: RecoveryDecision, health: MachineHealth
) -> WorkloadRecord | None:
    """The record held as ``decision`` says (since its machine became unreachable), or
    None when it is held so already: a held workload is written once, not every pass."""
    if health.since is None:
        return None
    found = held_as(record.workload, decision, health.since)
    return None if found is None else evolve(record, workload=found)


@frozen(kw_only=True)
class CopyNeed:
    """Where a service set to recover automatically could go, and what copies exist: what
    its recovery's copy asks are decided from."""

    workload: str
    artifact: str
    name: str
    fits_on: frozenset[str]  # machines other than its own with a card large enough for it
    verified_on: frozenset[str]  # machines whose agent reports a verified copy


def machines_that_fit(view: FleetView) -> frozenset[str]:
    """Machines with a card large enough for the prediction, or cards that hold it split
    when the view may split it, whatever holds them today and whatever copies they have
    (one look per model, shared by every service running it)."""
    predictions: dict[str, int] = {}
    fits: set[str] = set()
    for machine, gpu in view.fleet.gpus:
        if gpu.model not in predictions:
            predictions[gpu.model] = view.predict(gpu.model).total_bytes
        if predictions[gpu.model] <= gpu.total_bytes:
            fits.add(machine.name)
    ask = view.split
    if ask is not None:  # a model split across cards fits where its cards, all free, hold it
        for machine in view.fleet.machines:
            totals = [g.total_bytes for g in machine.gpus]
            if (
                machine.name not in fits
                and len(totals) > 1
                and split_for(
                    ask.arch, ask.weights, ask.config, ask.allowances, totals, min_cards=2
                )
            ):
                fits.add(machine.name)
    return frozenset(fits)


def copy_need(w: Workload, fits: frozenset[str], view: FleetView) -> CopyNeed | None:
    """What ``w``'s recovery needs of copies, given the machines that fit its model; None
    when it needs none (not a service set to recover automatically, holding no card, or no
    other machine could ever run it). Its own machine, and every machine excluded from
    placements, are never where its copy is kept."""
    if w.kind is not WorkloadKind.SERVICE or w.recovery_mode is not RecoveryMode.AUTOMATIC:
        return None
    if not holds_gpu(w.state):
        return None
    out = {machine for machine, _ in view.excluded} | {w.machine}
    fits_on = fits - out
    if not fits_on:
        return None
    return CopyNeed(
        workload=w.name,
        artifact=w.artifact_id.lower(),
        name=w.model,
        fits_on=fits_on,
        verified_on=view.verified_on,
    )


def copy_target(w: Workload, request: AdmissionRequest, view: FleetView) -> str | None:
    """Where ``w``'s copy is kept: the machine placement would choose for it, capacity set
    aside, its own machine excluded, if every machine held a copy."""
    excluded = (*view.excluded, (w.machine, "its own machine"))
    everywhere = frozenset(m.name for m in view.fleet.machines)
    elsewhere = evolve(view, ledger=Ledger(), excluded=excluded, verified_on=everywhere, cards=None)
    return admit_and_place(request, elsewhere).map(lambda p: p.machine).value_or(None)


@frozen(kw_only=True)
class CopyAsks:
    """The recovery asks to add (machine, artifact, name, asker) and to take back
    (machine, artifact, asker); both empty when nothing changes (no write)."""

    add: tuple[tuple[str, str, str, str], ...] = ()
    withdraw: tuple[tuple[str, str, str], ...] = ()


def copy_asks(
    needs: Iterable[CopyNeed],
    requests: Iterable[CopyRequest],
    target: Callable[[CopyNeed], str | None],
) -> CopyAsks:
    """The recovery asks that make the requests match the needs. A service relies on one
    verified copy on another machine that could run it: it asks for one (where ``target``
    says, asked only then) only when no such machine holds one and none it asked for still
    fits; an ask it no longer needs (it was deleted, set to never, or that machine cannot
    run it any more) is taken back. A person's asks are never touched."""
    by_workload = {n.workload: n for n in needs}
    held = tuple(requests)
    add: list[tuple[str, str, str, str]] = []
    withdraw: list[tuple[str, str, str]] = []
    for r in held:
        for ask in r.askers:
            if not ask.asker.startswith(RECOVERY_PREFIX):
                continue
            need = by_workload.get(ask.asker.removeprefix(RECOVERY_PREFIX))
            if need is None or need.artifact != r.artifact or r.machine not in need.fits_on:
                withdraw.append((r.machine, r.artifact, ask.asker))
    for need in by_workload.values():
        asker = recovery_asker(need.workload)
        relied = any(
            r.artifact == need.artifact
            and r.machine in need.fits_on
            and any(a.asker == asker for a in r.askers)
            for r in held
        )
        if relied or need.fits_on & need.verified_on:
            continue
        machine = target(need)
        if machine is not None:
            add.append((machine, need.artifact, need.name, asker))
    return CopyAsks(add=tuple(sorted(add)), withdraw=tuple(sorted(set(withdraw))))
