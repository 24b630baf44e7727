"""Scheduling: admission then placement over one view of the fleet, policy and drain.

Why it is so: docs/adr/decisions/domain.md (scheduling.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from attrs import evolve, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.admission import AdmissionRequest, Admitted, admit, assess_cards, gib
from nodeau.domain.free_cards import SHOWN, FreeCards
from nodeau.domain.hardware import Fleet, Machine
from nodeau.domain.health import Health
from nodeau.domain.limits import OrgLimits, machine_allowed
from nodeau.domain.memory import Prediction
from nodeau.domain.placement import Placement, SchedulingSettings, place
from nodeau.domain.plans import PlanScope, PlanTerms, plan_scope, plan_title
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.domain.split_placement import SplitAsk, SplitPlacement, place_split
from nodeau.domain.workloads import RecoveryMode, Workload, WorkloadKind, WorkloadState

DRAINED = "drained"
UNREACHABLE = "unreachable"
UPGRADING = "upgrading"
OUTSIDE_LIMITS = "outside the organisation's limits"


@frozen(kw_only=True)
class FleetView:
    """Everything a placement decision reads, taken at one moment."""

    fleet: Fleet
    ledger: Ledger
    settings: SchedulingSettings
    excluded: tuple[tuple[str, str], ...]
    verified_on: frozenset[str]
    predict: Callable[[str], Prediction]
    plan: PlanTerms  # the plan in force: its bounds leave machines and cards out
    # the free cards' index of this fleet, ledger, settings and plan, kept by a caller that
    # decides many times over one fleet (None: made when a decision needs it)
    cards: FreeCards | None = None
    # what splitting the model across cards of one machine is worked out from, when no one
    # card holds it (None: it is not split, and such a model is refused)
    split: SplitAsk | None = None

    def __attrs_post_init__(self) -> None:
        cards = self.cards
        if cards is not None and not (
            cards.ledger is self.ledger
            and cards.fleet is self.fleet
            and cards.settings == self.settings
            and cards.plan == self.plan
        ):
            raise ValueError("the free cards' index is not of this view's fleet and ledger")


def free_cards_of(view: FleetView) -> FreeCards:
    """The free cards' index of the view's fleet, ledger, settings and plan."""
    return FreeCards.of(view.fleet, view.ledger, view.settings, view.plan)


def exclusions(
    *,
    machines: Iterable[str],
    drained: Iterable[str],
    health: Mapping[str, Health],
    limits: OrgLimits,
) -> tuple[tuple[str, str], ...]:
    """Machines that are not candidates for new work, each with why.

    Drained first (the person's own mark), then unreachable or upgrading
    machines, then machines the organisation's limits leave out. A degraded
    machine (one signal quiet) stays a candidate: it is worth a look, not a
    reason to refuse work.
    """
    drained_set = frozenset(drained)
    out: list[tuple[str, str]] = []
    for name in sorted(set(machines)):
        state = health.get(name)
        if name in drained_set:
            out.append((name, DRAINED))
        elif state is Health.UNREACHABLE:
            out.append((name, UNREACHABLE))
        elif state is Health.UPGRADING:
            out.append((name, UPGRADING))
        elif not machine_allowed(limits, name):
            out.append((name, OUTSIDE_LIMITS))
    return tuple(out)


@frozen(kw_only=True)
class Scheduled:
    """Both decisions for one request: admission's arithmetic and placement's choice."""

    admitted: Admitted
    placement: Placement


def schedule(request: AdmissionRequest, view: FleetView) -> Result[Scheduled, Refusal]:
    """Admission, then placement among the cards it accepted; both decisions kept.

    A fleet of more than ``SHOWN`` cards is decided on its free cards' index (``view.cards``
    when the caller keeps one for the pass, else one made here), which keeps the best
    candidates and the counts; a smaller fleet, and any refusal, weighs every card.
    """
    size = len(view.cards.cards) if view.cards is not None else view.fleet.card_count
    if size > SHOWN:
        index = view.cards if view.cards is not None else free_cards_of(view)
        decided = index.decide(
            request, verified_on=view.verified_on, excluded=view.excluded, predict=view.predict
        )
        if isinstance(decided, Refusal):
            return split_schedule(request, view, decided)
        if decided is not None:
            return Success(Scheduled(admitted=decided[0], placement=decided[1]))
    admitted = admit(request, view.fleet, view.ledger, view.verified_on, view.predict)
    match admitted:
        case Failure(Refusal() as refusal):
            return split_schedule(request, view, refusal)
        case Success(Admitted() as accepted):
            pass
    scope = scope_of(view)
    excluded = {**dict(scope.left_out), **dict(view.excluded)}
    limited = limit_refusal(accepted, excluded, scope, view.plan)
    if limited is not None:
        return Failure(limited)
    match place(
        accepted, view.fleet, view.ledger, view.settings, excluded, covered=scope.covered_gpus
    ):
        case Failure(Refusal() as refusal):
            return Failure(refusal)
        case Success(Placement() as placement):
            return Success(Scheduled(admitted=accepted, placement=placement))
    raise AssertionError("place answers a Result")


# the refusals of one card after which a split is tried: none large enough, or every card
# large enough held (free cards that hold it together serve it rather than a refusal)
SPLIT_AFTER = (ReasonCode.NO_CARD_LARGE_ENOUGH, ReasonCode.NO_FREE_CARD)


def split_schedule(
    request: AdmissionRequest, view: FleetView, refusal: Refusal
) -> Result[Scheduled, Refusal]:
    """When no one free card holds the model and the view can split it: the fewest free
    cards of one machine that hold every share (machines excluded from new work and cards
    beyond the plan left out); else ``refusal``, saying that no split holds it either."""
    if view.split is None or refusal.code not in SPLIT_AFTER:
        return Failure(refusal)
    if view.fleet.card_count == 0:
        return Failure(refusal)
    scope = scope_of(view)
    excluded = {**dict(scope.left_out), **dict(view.excluded)}
    within = _fleet_of(view, lambda m: m not in excluded, scope.covered_gpus)
    found = place_split(within, view.ledger, view.verified_on, view.split, view.settings)
    if found is None:
        limited = split_limit_refusal(request.model, view, scope, excluded)
        if limited is not None:
            return Failure(limited)
        return Failure(
            Refusal.of(
                refusal.code,
                f"{refusal.sentence}; nor do the free cards of any one machine hold it "
                "split by layers",
            )
        )
    predictions, cards = assess_cards(
        request, view.fleet, view.ledger, view.verified_on, view.predict
    )
    admitted = Admitted(request=request, predictions=predictions, cards=cards)
    return Success(
        Scheduled(
            admitted=admitted,
            placement=split_placement(admitted, found, view, excluded, refusal.code),
        )
    )


def _fleet_of(
    view: FleetView, keep: Callable[[str], bool], cards: frozenset[str] | None = None
) -> Fleet:
    """The view's machines ``keep`` keeps, with their cards in ``cards`` (None: all)."""
    return Fleet(
        machines=tuple(
            Machine(
                name=m.name,
                gpus=tuple(g for g in m.gpus if cards is None or g.uuid in cards),
            )
            for m in view.fleet.machines
            if keep(m.name)
        )
    )


def split_limit_refusal(
    model: str, view: FleetView, scope: PlanScope, excluded: Mapping[str, str]
) -> Refusal | None:
    """A limit refusal when a split would be placed but for the organisation's machine
    limits or the plan's bounds (as ``limit_refusal`` says for one card), else None."""
    assert view.split is not None
    plan_why = dict(scope.left_out)
    limits = {m for m, why in excluded.items() if why == OUTSIDE_LIMITS or why == plan_why.get(m)}
    beyond = _fleet_of(view, lambda m: m not in excluded or m in limits)
    found = place_split(beyond, view.ledger, view.verified_on, view.split, view.settings)
    if found is None:
        return None
    where = found.machine
    if excluded.get(where) == OUTSIDE_LIMITS:
        return Refusal.of(
            ReasonCode.MACHINE_NOT_ALLOWED,
            f"the cards that can take {model} split are on a machine outside the "
            f"organisation's limits ({where}); an admin can add it to the limits' allowed "
            "machines",
        )
    title = plan_title(view.plan.name)
    code, bound = (
        (ReasonCode.MACHINES_OVER_PLAN, f"{view.plan.max_machines} machines")
        if plan_why.get(where, "").endswith("machines")
        else (ReasonCode.GPUS_OVER_PLAN, f"{view.plan.max_gpus} GPUs")
    )
    return Refusal.of(
        code,
        f"the cards that can take {model} split are beyond what the {title} plan covers "
        f"({bound}; on {where}); an entitlement for a larger plan covers them (nodeau plan)",
    )


def split_placement(
    admitted: Admitted,
    found: SplitPlacement,
    view: FleetView,
    excluded: Mapping[str, str],
    alone: ReasonCode,
) -> Placement:
    """The placement of a split: a reservation of each card's predicted share, in slot
    order, and why that many cards (``alone``: why one card does not take it)."""
    name = admitted.request.workload
    reservations = tuple(
        Reservation(workload=name, machine=found.machine, gpu_uuid=uuid, bytes=share.total_bytes)
        for uuid, share in zip(found.gpu_uuids, found.shares, strict=True)
    )
    largest = max(admitted.cards, key=lambda c: (c.total_bytes, c.machine, c.gpu_uuid))
    machine = view.fleet.machine(found.machine)
    if machine is None:
        raise ValueError(f"a split placed on {found.machine}, a machine the fleet does not list")
    cards = len(machine.gpus)
    model, needed = admitted.request.model, gib(largest.needed_bytes)
    one = (
        f"every card that holds {model} alone ({needed}, {largest.source.value}) is held"
        if alone is ReasonCode.NO_FREE_CARD
        else f"no one card holds {model} (it needs {needed}, {largest.source.value}; the "
        f"largest card has {gib(largest.total_bytes)})"
    )
    why = (
        f"{one}, so it is split by layers across {len(reservations)} of {found.machine}'s "
        f"{cards} cards, the fewest free cards of one machine whose every share fits (slots "
        f"{found.tensor_split}; shares " + ", ".join(gib(r.bytes) for r in reservations) + ")"
    )
    return Placement(
        workload=name,
        machine=found.machine,
        gpu_uuid=reservations[0].gpu_uuid,
        reservation=reservations[0],
        policy=view.settings.policy_for(found.machine),
        ranked=(),
        excluded=tuple(sorted(excluded.items())),
        why=why,
        more=reservations[1:],
        counts=found.counts,
        shares=found.shares,
    )


def scope_of(view: FleetView) -> PlanScope:
    """What the view's plan covers of its fleet, counted by what each machine does now:
    those holding a reservation, then those not excluded from new work, then the rest."""
    machines = tuple((m.name, tuple(g.uuid for g in m.gpus)) for m in view.fleet.machines)
    out = frozenset(name for name, _why in view.excluded)
    return plan_scope(
        view.plan,
        machines,
        holding=frozenset(r.machine for r in view.ledger.reservations),
        taking_work=frozenset(name for name, _gpus in machines if name not in out),
    )


def limit_refusal(
    admitted: Admitted, excluded: Mapping[str, str], scope: PlanScope, plan: PlanTerms
) -> Refusal | None:
    """A limit refusal when every card admission accepted is left out by a limit alone.

    The organisation's machine limits first, then the plan's bounds: a person who is sent
    to the plan would still meet the organisation's limit. A card left out by anything else
    as well (drained, unreachable) is the capacity refusal placement gives, naming why.
    """
    candidates = admitted.candidates
    if not candidates:
        return None
    plan_why = dict(scope.left_out)
    blocked: list[tuple[str, str]] = []  # (machine, which limit)
    for card in candidates:
        why = excluded.get(card.machine)
        if why == OUTSIDE_LIMITS:
            blocked.append((card.machine, "organisation"))
        elif why is None and card.gpu_uuid not in scope.covered_gpus:
            blocked.append((card.machine, "plan-gpus"))
        elif why is not None and why == plan_why.get(card.machine):
            kind = "plan-machines" if why.endswith("machines") else "plan-gpus"
            blocked.append((card.machine, kind))
        else:
            return None
    model = admitted.request.model
    where = ", ".join(sorted({m for m, _ in blocked}))
    kinds = {k for _, k in blocked}
    if "organisation" in kinds:
        return Refusal.of(
            ReasonCode.MACHINE_NOT_ALLOWED,
            f"every card that can take {model} is on a machine outside the organisation's "
            f"limits ({where}); an admin can add it to the limits' allowed machines",
        )
    title = plan_title(plan.name)
    code, bound = (
        (ReasonCode.MACHINES_OVER_PLAN, f"{plan.max_machines} machines")
        if "plan-machines" in kinds
        else (ReasonCode.GPUS_OVER_PLAN, f"{plan.max_gpus} GPUs")
    )
    return Refusal.of(
        code,
        f"every card that can take {model} is beyond what the {title} plan covers "
        f"({bound}; on {where}); an entitlement for a larger plan covers them (nodeau plan)",
    )


def admit_and_place(request: AdmissionRequest, view: FleetView) -> Result[Placement, Refusal]:
    """Admission, then placement: the placement alone."""
    return schedule(request, view).map(lambda scheduled: scheduled.placement)


def files_target(request: AdmissionRequest, view: FleetView) -> str | None:
    """The machine that would be chosen if every machine held a verified copy.

    This is where a copy is worth fetching when the only thing missing is the
    model's files; None when even then nothing could take the workload.
    """
    everywhere = frozenset(m.name for m in view.fleet.machines)
    outcome = admit_and_place(request, evolve(view, verified_on=everywhere))
    return outcome.map(lambda placement: placement.machine).value_or(None)


def scheduled_admission(
    request: AdmissionRequest,
    view: FleetView,
    *,
    kind: WorkloadKind,
    recovery: RecoveryMode,
    recovery_after: timedelta,
    model_path: Callable[[str], str],
    now: datetime,
) -> Result[Admission, Refusal]:
    """Admission and placement on ``view``, and the admitted workload's record on the card
    chosen (its model file as ``model_path(machine)`` gives it): what every plane records."""
    match schedule(request, view):
        case Success(Scheduled() as both):
            pass
        case Failure(Refusal() as refusal):
            return Failure(refusal)
    workload = Workload(
        name=request.workload,
        kind=kind,
        model=request.model,
        artifact_id=request.artifact_id,
        names=request.names,
        machine=both.placement.machine,
        gpu_uuid=both.placement.gpu_uuid,
        more_cards=tuple(r.gpu_uuid for r in both.placement.more),
        tensor_split=both.placement.counts if both.placement.more else (),
        state=WorkloadState.ADMITTED,
        since=now,
        recovery_mode=recovery,
        recovery_after=recovery_after,
    )
    record = WorkloadRecord(
        workload=workload, config=request.config, model_path=model_path(workload.machine)
    )
    return Success(
        Admission(record=record, admitted=both.admitted, placement=both.placement, decided_at=now)
    )
