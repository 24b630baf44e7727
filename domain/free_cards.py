"""Free cards: a large fleet's free cards in placement's order, kept from one decision to the next.

Why it is so: docs/adr/decisions/domain.md (free_cards.py).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import cache

from attrs import frozen
from returns.result import Failure, Result, Success

from nodeau.domain.admission import (
    HOLDERS_NAMED,
    AdmissionRequest,
    Admitted,
    CardAssessment,
    CardCounts,
    held_refusal,
)
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import Prediction
from nodeau.domain.placement import (
    Placement,
    Policy,
    RankedCard,
    SchedulingSettings,
    explain_choice,
)
from nodeau.domain.plans import PlanScope, PlanTerms, plan_scope
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, Reservation, reserve

SHOWN = 8  # the candidates a decision keeps, best first (a fleet this small keeps every card)

# (the machine's score, negated so the best sorts first; the card's size; machine; UUID).
# The score is held/cards (pack) or free/cards (spread) as one division: two different
# fractions with denominators under 2**26 never round to the same float, and equal ones
# always do, so the float orders exactly as the fraction would.
Key = tuple[float, int, str, str]


@frozen(kw_only=True)
class _Card:
    machine: str
    model: str
    total_bytes: int


@cache
def _share(held: int, cards: int) -> Fraction:
    """``held`` of ``cards`` as a fraction (a fleet has few distinct ones: made once each)."""
    return Fraction(held, cards)


def _sort_score(policy: Policy, held: int, cards: int) -> float:
    return -(held if policy is Policy.PACK else cards - held) / cards


# What one request shape asks of the index: (GPU model, predicted peak) for each model,
# the machines with a verified copy, the machines that are not candidates.
# (each GPU model's need, machines with a verified copy, machines left out, cards covered)
_Needs = tuple[tuple[tuple[str, int], ...], frozenset[str], frozenset[str], frozenset[str]]


class FreeCards:
    """A fleet's free cards in placement's order, over one ledger (see the module)."""

    def __init__(
        self,
        *,
        fleet: Fleet,
        settings: SchedulingSettings,
        plan: PlanTerms,
        ledger: Ledger,
        scope: PlanScope,
        models: tuple[str, ...],
        cards: dict[str, _Card],
        on_machine: dict[str, tuple[str, ...]],
        held_on: dict[str, int],
        order: list[Key],
        groups: dict[tuple[str, int], tuple[int, int]],
    ) -> None:
        self.fleet = fleet
        self.settings = settings
        self.plan = plan
        self.ledger = ledger
        self.scope = scope
        self.models = models  # the fleet's GPU models, in the fleet's order
        self.cards = cards  # by UUID
        self.on_machine = on_machine  # the UUIDs of each machine's cards
        self.held_on = held_on  # reservations per machine (placement's "holds")
        self.order = order  # every free card, best first
        self.groups = groups  # (model, size) -> (cards, held)
        # per request shape: (free cards that fit on a machine with a verified copy, of
        # them the ones placement may choose); kept up to date by ``reserve``
        self._tallies: dict[_Needs, tuple[int, int]] = {}

    @classmethod
    def of(
        cls, fleet: Fleet, ledger: Ledger, settings: SchedulingSettings, plan: PlanTerms
    ) -> FreeCards:
        """The index of ``fleet`` over ``ledger``."""
        cards: dict[str, _Card] = {}
        on_machine: dict[str, tuple[str, ...]] = {}
        models: dict[str, None] = {}
        groups: dict[tuple[str, int], tuple[int, int]] = {}
        for m in fleet.machines:
            on_machine.setdefault(m.name, tuple(g.uuid for g in m.gpus))
            for g in m.gpus:
                models.setdefault(g.model, None)
                cards.setdefault(
                    g.uuid, _Card(machine=m.name, model=g.model, total_bytes=g.total_bytes)
                )
        held_on = {name: len(ledger.on_machine(name)) for name in on_machine}
        policies = dict(settings.overrides)
        scores = {
            name: _sort_score(policies.get(name, settings.fleet_policy), held_on[name], len(uuids))
            for name, uuids in on_machine.items()
            if uuids
        }
        order: list[Key] = []
        for machine, gpu in fleet.gpus:
            group = (gpu.model, gpu.total_bytes)
            count, held = groups.get(group, (0, 0))
            taken = ledger.holder(gpu.uuid) is not None
            groups[group] = (count + 1, held + taken)
            if not taken:
                order.append((scores[machine.name], gpu.total_bytes, machine.name, gpu.uuid))
        order.sort()
        return cls(
            fleet=fleet,
            settings=settings,
            plan=plan,
            ledger=ledger,
            scope=plan_scope(
                plan,
                on_machine.items(),
                holding=frozenset(name for name, held in held_on.items() if held),
            ),
            models=tuple(models),
            cards=cards,
            on_machine=on_machine,
            held_on=held_on,
            order=order,
            groups=groups,
        )

    def reserve(self, reservation: Reservation) -> Result[FreeCards, Refusal]:
        """Record ``reservation``: this index, now of the ledger with it recorded (the
        ledger's refusal, and nothing changed, when the card is held or too small)."""
        card = self.cards.get(reservation.gpu_uuid)
        machine_of = None if card is None else self.fleet.machine(card.machine)
        gpu = None if machine_of is None else machine_of.gpu(reservation.gpu_uuid)
        if card is None or gpu is None:
            raise ValueError(f"{reservation.gpu_uuid} is not a card of this fleet")
        if reservation.machine != card.machine:
            raise ValueError(
                f"{reservation.gpu_uuid} is on {card.machine}, not on {reservation.machine}"
            )
        match reserve(self.ledger, reservation, gpu):
            case Failure() as refused:
                return refused
            case Success(Ledger() as ledger):
                pass
        if ledger is self.ledger:  # the same reservation again: nothing changes
            return Success(self)
        machine = reservation.machine
        held_before = self.held_on.get(machine, 0)
        self.held_on[machine] = held_before + 1
        uuids = self.on_machine.get(machine, ())
        policy = self.settings.policy_for(machine)
        for uuid in uuids:
            total = self.cards[uuid].total_bytes
            old = (_sort_score(policy, held_before, len(uuids)), total, machine, uuid)
            at = bisect_left(self.order, old)
            if at < len(self.order) and self.order[at] == old:
                del self.order[at]
                if uuid != reservation.gpu_uuid:
                    score = _sort_score(policy, held_before + 1, len(uuids))
                    insort(self.order, (score, total, machine, uuid))
        group = (card.model, card.total_bytes)
        count, held = self.groups[group]
        self.groups[group] = (count, held + 1)
        for needs, tally in self._tallies.items():
            self._tallies[needs] = _after_one(needs, card, reservation.gpu_uuid, tally)
        self.ledger = ledger
        return Success(self)

    def follow(self, ledger: Ledger) -> FreeCards:
        """This index brought to ``ledger``: the reservations it lacks recorded; made afresh
        when ``ledger`` lacks one the index holds (a card freed) or holds a card otherwise."""
        if ledger is self.ledger:
            return self
        one = ledger.added_to(self.ledger)
        card = None if one is None else self.cards.get(one.gpu_uuid)
        if (
            one is not None
            and card is not None
            and card.machine == one.machine
            and isinstance(self.reserve(one), Success)
        ):
            self.ledger = ledger  # the same reservations: the caller's ledger, to follow again
            return self
        mine = {(r.gpu_uuid, r.workload, r.bytes) for r in self.ledger.reservations}
        theirs = [r for r in ledger.reservations if (r.gpu_uuid, r.workload, r.bytes) not in mine]
        if len(ledger.reservations) - len(theirs) == len(mine) == len(self.ledger.reservations):
            for r in theirs:
                card = self.cards.get(r.gpu_uuid)
                if (
                    card is None
                    or card.machine != r.machine
                    or isinstance(self.reserve(r), Failure)
                ):
                    break
            else:
                self.ledger = ledger
                return self
        return FreeCards.of(self.fleet, ledger, self.settings, self.plan)

    def decide(
        self,
        request: AdmissionRequest,
        *,
        verified_on: frozenset[str],
        excluded: tuple[tuple[str, str], ...],
        predict: Callable[[str], Prediction],
    ) -> tuple[Admitted, Placement] | Refusal | None:
        """Admission and placement when at least one card may take the request; the
        refusal when every card large enough is held (a full fleet's refusal, the common
        one); None for any other refusal (the caller weighs every card to say why).
        ``excluded``: the machines that are not candidates, with why (the plan's scope
        adds its own, counted with ``excluded`` as ``plans.coverage_order`` says)."""
        scope = self._scope_with(excluded)
        left_out = {**dict(scope.left_out), **dict(excluded)}
        predictions = tuple((model, predict(model)) for model in self.models)
        needed = {model: p.total_bytes for model, p in predictions}
        needs: _Needs = (
            tuple(needed.items()),
            verified_on,
            frozenset(left_out),
            scope.covered_gpus,
        )
        accepted, eligible = self._tally(needs)
        if eligible == 0:
            return self._all_held(request, needed, dict(predictions)) if accepted == 0 else None
        best: list[tuple[Key, _Card]] = []
        for key in self.order:
            card = self.cards[key[3]]
            if (
                card.total_bytes >= needed[card.model]
                and card.machine in verified_on
                and card.machine not in left_out
                and key[3] in scope.covered_gpus
            ):
                best.append((key, card))
                if len(best) == SHOWN:
                    break
        sources = dict(predictions)
        shown = tuple(
            CardAssessment(
                machine=card.machine,
                gpu_uuid=key[3],
                gpu_model=card.model,
                total_bytes=card.total_bytes,
                reserved_bytes=0,
                free_bytes=card.total_bytes,
                held_by=None,
                needed_bytes=needed[card.model],
                source=sources[card.model].source,
                verified_copy=True,
                rejection=None,
            )
            for key, card in best
        )
        too_small = held = 0
        for (model, size), (count, taken) in self.groups.items():
            if size < needed[model]:
                too_small += count
            else:
                held += taken
        total = sum(count for count, _taken in self.groups.values())
        counts = CardCounts(
            cards=total,
            too_small=too_small,
            held=held,
            no_verified_copy=total - too_small - held - accepted,
            accepted=accepted,
        )
        admitted = Admitted(request=request, predictions=predictions, cards=shown, counts=counts)
        ranked = tuple(self._ranked(card.machine, key[3], card.total_bytes) for key, card in best)
        chosen = shown[0]
        return admitted, Placement(
            workload=request.workload,
            machine=chosen.machine,
            gpu_uuid=chosen.gpu_uuid,
            reservation=Reservation(
                workload=request.workload,
                machine=chosen.machine,
                gpu_uuid=chosen.gpu_uuid,
                bytes=chosen.needed_bytes,
            ),
            policy=ranked[0].policy,
            ranked=ranked,
            candidates=eligible,
            excluded=tuple(sorted(left_out.items())),
            why=explain_choice(ranked[0], chosen.needed_bytes, eligible - 1),
        )

    def _scope_with(self, excluded: tuple[tuple[str, str], ...]) -> PlanScope:
        """What the plan covers over this index's ledger once the ``excluded`` machines
        count after those that take new work (the index's own scope under a plan without
        bounds, where the order changes nothing)."""
        if self.plan.max_machines is None and self.plan.max_gpus is None:
            return self.scope
        out = frozenset(name for name, _why in excluded)
        return plan_scope(
            self.plan,
            self.on_machine.items(),
            holding=frozenset(name for name, held in self.held_on.items() if held),
            taking_work=frozenset(name for name in self.on_machine if name not in out),
        )

    def _all_held(
        self,
        request: AdmissionRequest,
        needed: Mapping[str, int],
        predictions: Mapping[str, Prediction],
    ) -> Refusal | None:
        """The refusal naming the first holders, when no free card is large enough and a
        held one is; None otherwise."""
        free_large = held_large = 0
        for (model, size), (count, taken) in self.groups.items():
            if size >= needed[model]:
                free_large += count - taken
                held_large += taken
        if free_large or not held_large:
            return None
        named: list[CardAssessment] = []
        for machine, gpu in self.fleet.gpus:
            holder = self.ledger.holder(gpu.uuid)
            if holder is None or gpu.total_bytes < needed[gpu.model]:
                continue
            named.append(
                CardAssessment(
                    machine=machine.name,
                    gpu_uuid=gpu.uuid,
                    gpu_model=gpu.model,
                    total_bytes=gpu.total_bytes,
                    reserved_bytes=self.ledger.reserved_bytes(gpu.uuid),
                    free_bytes=0,
                    held_by=holder.workload,
                    needed_bytes=needed[gpu.model],
                    source=predictions[gpu.model].source,
                    verified_copy=True,  # not read by the refusal
                    rejection=ReasonCode.CARD_HELD,
                )
            )
            if len(named) == HOLDERS_NAMED:
                break
        return held_refusal(request, named, held_large)

    def _ranked(self, machine: str, uuid: str, total: int) -> RankedCard:
        policy = self.settings.policy_for(machine)
        cards = len(self.on_machine[machine])
        held = self.held_on[machine]
        used = _share(held, cards)
        return RankedCard(
            machine=machine,
            gpu_uuid=uuid,
            total_bytes=total,
            policy=policy,
            machine_cards=cards,
            machine_held=held,
            score=used if policy is Policy.PACK else 1 - used,
        )

    def _tally(self, needs: _Needs) -> tuple[int, int]:
        """(free cards that fit on a machine with a verified copy, of them the ones
        placement may choose), counted once per request shape."""
        tally = self._tallies.get(needs)
        if tally is None:
            accepted = eligible = 0
            needed = dict(needs[0])
            for key in self.order:
                fits, may = _counted(needs, needed, self.cards[key[3]], key[3])
                accepted += fits
                eligible += may
            tally = self._tallies[needs] = (accepted, eligible)
        return tally


def _counted(needs: _Needs, needed: Mapping[str, int], card: _Card, uuid: str) -> tuple[bool, bool]:
    """Whether a free card is accepted for ``needs``, and whether placement may choose it."""
    _needed, verified_on, excluded, covered = needs
    fits = card.total_bytes >= needed[card.model] and card.machine in verified_on
    return fits, fits and card.machine not in excluded and uuid in covered


def _after_one(needs: _Needs, card: _Card, uuid: str, tally: tuple[int, int]) -> tuple[int, int]:
    fits, may = _counted(needs, dict(needs[0]), card, uuid)
    return tally[0] - fits, tally[1] - may
