"""Admission: can this safely run? Decided before anything is created.

Why it is so: docs/adr/decisions/domain.md (admission.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attrs import Factory, field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.hardware import Fleet
from nodeau.domain.memory import GIB, Prediction, RuntimeConfig, Source
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.reservations import Ledger, free_bytes

HOLDERS_NAMED = 8  # a refusal names this many machines or holders, then says how many more


def gib(n: int) -> str:
    """Bytes as a person reads them in a decision: GiB with two decimals."""
    return f"{n / GIB:.2f} GiB"


@frozen(kw_only=True)
class AdmissionRequest:
    """What is asked for: a workload serving an artifact in a configuration."""

    workload: str
    model: str
    artifact_id: str
    config: RuntimeConfig
    names: tuple[str, ...] = ()  # every name the artifact goes by (aliases, catalog names)


@frozen(kw_only=True)
class CardAssessment:
    """One card weighed against the prediction: its arithmetic and its verdict."""

    machine: str
    gpu_uuid: str
    gpu_model: str
    total_bytes: int
    reserved_bytes: int
    free_bytes: int
    held_by: str | None
    needed_bytes: int
    source: Source
    verified_copy: bool
    rejection: ReasonCode | None

    @property
    def accepted(self) -> bool:
        return self.rejection is None


@frozen(kw_only=True)
class CardCounts:
    """Every card of the fleet by its verdict, whether or not the decision kept it."""

    cards: int
    too_small: int
    held: int
    no_verified_copy: int
    accepted: int

    @classmethod
    def of(cls, cards: tuple[CardAssessment, ...]) -> CardCounts:
        """The counts of assessments that are every card of the fleet."""
        verdicts = [c.rejection for c in cards]
        return cls(
            cards=len(cards),
            too_small=verdicts.count(ReasonCode.CARD_TOO_SMALL),
            held=verdicts.count(ReasonCode.CARD_HELD),
            no_verified_copy=verdicts.count(ReasonCode.NO_VERIFIED_COPY),
            accepted=verdicts.count(None),
        )


def _every_card(admitted: Admitted) -> CardCounts:
    return CardCounts.of(admitted.cards)


@frozen(kw_only=True)
class Admitted:
    """An accepted request: the predictions used, the cards kept and every card's verdict.

    ``cards`` is every card's assessment on a fleet of up to ``free_cards.SHOWN`` cards;
    on a larger one, the candidates placement ranked first, best first (a decision must
    not grow with the fleet). ``counts`` counts every card by verdict either way (an
    admission recorded before the counts were kept counted its cards, which were all).
    """

    request: AdmissionRequest
    predictions: tuple[tuple[str, Prediction], ...]
    cards: tuple[CardAssessment, ...]
    counts: CardCounts = field(default=Factory(_every_card, takes_self=True))

    @property
    def candidates(self) -> tuple[CardAssessment, ...]:
        """The cards placement may choose among."""
        return tuple(c for c in self.cards if c.accepted)

    def prediction_for(self, gpu_model: str) -> Prediction:
        return dict(self.predictions)[gpu_model]


def card_rejection(*, needed: int, total: int, free: int, verified_copy: bool) -> ReasonCode | None:
    """Why a card cannot take the workload, or None when it can.

    Checked in the order a person would fix them: a card too small can never
    take it; a held card frees one day; a missing copy can be fetched.
    """
    if needed > total:
        return ReasonCode.CARD_TOO_SMALL
    if needed > free:  # a held card has nothing free: one workload per card
        return ReasonCode.CARD_HELD
    if not verified_copy:
        return ReasonCode.NO_VERIFIED_COPY
    return None


def assess_cards(
    request: AdmissionRequest,
    fleet: Fleet,
    ledger: Ledger,
    verified_on: frozenset[str],
    predict: Callable[[str], Prediction],
) -> tuple[tuple[tuple[str, Prediction], ...], tuple[CardAssessment, ...]]:
    """The prediction for each GPU model in the fleet, and every card's assessment."""
    predictions: dict[str, Prediction] = {}
    cards: list[CardAssessment] = []
    for machine, gpu in fleet.gpus:
        if gpu.model not in predictions:
            predictions[gpu.model] = predict(gpu.model)
        prediction = predictions[gpu.model]
        holder = ledger.holder(gpu.uuid)
        free = free_bytes(ledger, gpu)
        verified = machine.name in verified_on
        cards.append(
            CardAssessment(
                machine=machine.name,
                gpu_uuid=gpu.uuid,
                gpu_model=gpu.model,
                total_bytes=gpu.total_bytes,
                reserved_bytes=ledger.reserved_bytes(gpu.uuid),
                free_bytes=free,
                held_by=None if holder is None else holder.workload,
                needed_bytes=prediction.total_bytes,
                source=prediction.source,
                verified_copy=verified,
                rejection=card_rejection(
                    needed=prediction.total_bytes,
                    total=gpu.total_bytes,
                    free=free,
                    verified_copy=verified,
                ),
            )
        )
    return tuple(predictions.items()), tuple(cards)


def held_refusal(request: AdmissionRequest, named: Sequence[CardAssessment], held: int) -> Refusal:
    """Every card large enough is held: the first ``named`` of the ``held`` such cards."""
    by = ", ".join(f"{c.gpu_uuid} on {c.machine} by {c.held_by}" for c in named)
    more = held - len(named)
    return Refusal.of(
        ReasonCode.NO_FREE_CARD,
        f"{request.model} needs {gib(named[0].needed_bytes)} ({named[0].source.value}); "
        f"every card large enough is held: {by}" + (f", and {more:,} more" if more > 0 else ""),
    )


def capacity_refusal(request: AdmissionRequest, cards: tuple[CardAssessment, ...]) -> Refusal:
    """The capacity refusal closest to being fixed, when no card accepted the request."""
    if not cards:
        return Refusal.of(
            ReasonCode.NO_CARD_LARGE_ENOUGH,
            f"{request.model} cannot run: no machine in the fleet reports a GPU",
        )
    unverified = [c for c in cards if c.rejection is ReasonCode.NO_VERIFIED_COPY]
    if unverified:
        named = sorted({c.machine for c in unverified})
        more = len(named) - HOLDERS_NAMED
        machines = ", ".join(named[:HOLDERS_NAMED]) + (f" and {more:,} more" if more > 0 else "")
        return Refusal.of(
            ReasonCode.NO_VERIFIED_COPY,
            f"{request.model} fits a free card on {machines}, but no such machine holds a "
            "verified copy of its files; fetch or import it there, then verify it",
        )
    held = [c for c in cards if c.rejection is ReasonCode.CARD_HELD]
    if held:
        return held_refusal(request, held[:HOLDERS_NAMED], len(held))
    largest = max(cards, key=lambda c: (c.total_bytes, c.machine, c.gpu_uuid))
    return Refusal.of(
        ReasonCode.NO_CARD_LARGE_ENOUGH,
        f"{request.model} needs {gib(largest.needed_bytes)} ({largest.source.value}) "
        f"and the largest card, {largest.gpu_uuid} on {largest.machine}, has "
        f"{gib(largest.total_bytes)}",
    )


def admit(
    request: AdmissionRequest,
    fleet: Fleet,
    ledger: Ledger,
    verified_on: frozenset[str],
    predict: Callable[[str], Prediction],
) -> Result[Admitted, Refusal]:
    """Admit the request if at least one card can take it, keeping the arithmetic.

    ``verified_on`` names the machines holding a verified copy of the artifact;
    ``predict`` gives the predicted peak for a GPU model (measured where a
    measurement exists, else estimated).
    """
    predictions, cards = assess_cards(request, fleet, ledger, verified_on, predict)
    if any(c.accepted for c in cards):
        return Success(Admitted(request=request, predictions=predictions, cards=cards))
    return Failure(capacity_refusal(request, cards))
