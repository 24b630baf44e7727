"""Placement: where should it run? Chosen only among cards admission accepted.

Why it is so: docs/adr/decisions/domain.md (placement.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from fractions import Fraction

from attrs import Factory, field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.admission import Admitted, CardAssessment, gib
from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import Prediction
from nodeau.domain.model_server import SERVER_CANNOT
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, Reservation


class Policy(str, enum.Enum):
    PACK = "pack"
    SPREAD = "spread"


@frozen(kw_only=True)
class SchedulingSettings:
    """The fleet-wide policy and the machines that override it."""

    fleet_policy: Policy = Policy.PACK
    overrides: tuple[tuple[str, Policy], ...] = ()

    def policy_for(self, machine: str) -> Policy:
        return dict(self.overrides).get(machine, self.fleet_policy)


@frozen(kw_only=True)
class RankedCard:
    """A candidate card with the figures its policy ranked it by."""

    machine: str
    gpu_uuid: str
    total_bytes: int
    policy: Policy
    machine_cards: int
    machine_held: int
    score: Fraction


@frozen(kw_only=True)
class Placement:
    """The chosen card, the reservation to record, and why."""

    workload: str
    machine: str
    gpu_uuid: str
    reservation: Reservation
    policy: Policy
    ranked: tuple[RankedCard, ...]  # best first: every candidate, or the first on a large fleet
    excluded: tuple[tuple[str, str], ...]
    why: str
    candidates: int = field(default=Factory(lambda p: len(p.ranked), takes_self=True))
    # split across cards of one machine: the further cards' reservations in slot order,
    # every card's slot count and predicted share (empty: the one card above)
    more: tuple[Reservation, ...] = ()
    counts: tuple[int, ...] = ()
    shares: tuple[Prediction, ...] = ()

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        """Every card's reservation, in slot order."""
        return (self.reservation, *self.more)


def machine_score(policy: Policy, held: int, cards: int) -> Fraction:
    """Higher is better: pack favours the fullest machine, spread the emptiest."""
    used = Fraction(held, cards)
    return used if policy is Policy.PACK else 1 - used


def rank(
    candidates: tuple[CardAssessment, ...],
    fleet: Fleet,
    ledger: Ledger,
    settings: SchedulingSettings,
) -> tuple[RankedCard, ...]:
    """Candidates best first, each scored by its machine's policy (a machine's score is
    worked out once, however many of its cards are candidates)."""
    ranked: list[tuple[tuple[Fraction, int, str, str], RankedCard]] = []
    machines: dict[str, tuple[Policy, int, int, Fraction]] = {}
    for c in candidates:
        scored = machines.get(c.machine)
        if scored is None:
            machine = fleet.machine(c.machine)
            if machine is None:
                raise ValueError(
                    f"candidate {c.gpu_uuid} is on {c.machine}, which is not in the fleet"
                )
            cards = len(machine.gpus)
            held = len(ledger.on_machine(c.machine))
            policy = settings.policy_for(c.machine)
            scored = machines[c.machine] = (policy, cards, held, machine_score(policy, held, cards))
        policy, cards, held, score = scored
        card = RankedCard(
            machine=c.machine,
            gpu_uuid=c.gpu_uuid,
            total_bytes=c.total_bytes,
            policy=policy,
            machine_cards=cards,
            machine_held=held,
            score=score,
        )
        ranked.append(((-score, c.total_bytes, c.machine, c.gpu_uuid), card))
    ranked.sort(key=lambda keyed: keyed[0])
    return tuple(card for _key, card in ranked)


def explain_choice(best: RankedCard, needed: int, others: int) -> str:
    """The sentence ``nodeau placement explain`` prints for the chosen card."""
    if best.policy is Policy.PACK:
        machine_part = (
            f"pack: {best.machine} already holds {best.machine_held} of its "
            f"{best.machine_cards} cards, the fullest machine with a card that fits"
        )
    else:
        machine_part = (
            f"spread: {best.machine} holds {best.machine_held} of its "
            f"{best.machine_cards} cards, the emptiest machine with a card that fits"
        )
    return (
        f"{machine_part}; {best.gpu_uuid} ({gib(best.total_bytes)}) is the smallest free card "
        f"there that takes {gib(needed)}; {others} other candidate(s) ranked below"
    )


def place(
    admitted: Admitted,
    fleet: Fleet,
    ledger: Ledger,
    settings: SchedulingSettings,
    excluded: Mapping[str, str],
    covered: frozenset[str] | None = None,
) -> Result[Placement, Refusal]:
    """Choose a card among admission's candidates, skipping excluded machines.

    ``excluded`` maps a machine to why it is not a candidate ("drained",
    "unreachable", "outside the organisation's limits"); drained machines must
    be in it. ``covered``: the cards the plan covers (``None``: every card).
    """
    eligible = tuple(
        c
        for c in admitted.candidates
        if c.machine not in excluded and (covered is None or c.gpu_uuid in covered)
    )
    left_out = tuple(sorted((m, why) for m, why in excluded.items()))
    if not eligible:
        where = ", ".join(f"{m} ({why})" for m, why in left_out) or "none"
        on = {c.machine for c in admitted.candidates}
        if on and all(excluded.get(m, "").startswith(SERVER_CANNOT) for m in on):
            return Failure(
                Refusal.of(
                    ReasonCode.SERVER_CANNOT_USE_CARD,
                    f"{admitted.request.model} was admitted, but on every machine whose cards "
                    f"can take it the model server cannot use them: {where}",
                )
            )
        return Failure(
            Refusal.of(
                ReasonCode.NO_ELIGIBLE_MACHINE,
                f"{admitted.request.model} was admitted, but every card that can take it is on "
                f"a machine that is not a candidate: {where}",
            )
        )
    ranked = rank(eligible, fleet, ledger, settings)
    best = ranked[0]
    chosen = next(c for c in eligible if c.gpu_uuid == best.gpu_uuid)
    reservation = Reservation(
        workload=admitted.request.workload,
        machine=best.machine,
        gpu_uuid=best.gpu_uuid,
        bytes=chosen.needed_bytes,
    )
    return Success(
        Placement(
            workload=admitted.request.workload,
            machine=best.machine,
            gpu_uuid=best.gpu_uuid,
            reservation=reservation,
            policy=best.policy,
            ranked=ranked,
            excluded=left_out,
            why=explain_choice(best, chosen.needed_bytes, len(ranked) - 1),
        )
    )
