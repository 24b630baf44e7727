"""The one order of checks an ask meets before it holds a card, and the decision they make.

Qualification, the model server's use of the cards, the organisation (permission, limits,
quotas), then placement: ``checks`` yields each answer in that order and stops at the first
refusal; ``decide`` is that refusal or the placement's admission. Both planes decide with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from attrs import frozen
from returns.result import Failure, Result, Success

from nodeau.domain.limits import RequestShape
from nodeau.domain.organisation import Organisation, Requester, Spending, role_of, run_checks
from nodeau.domain.records import Admission
from nodeau.domain.refusals import Refusal
from nodeau.domain.tasks import Task

QUALIFICATION = "qualification"
MODEL_SERVER = "model server"
PLACEMENT = "placement"

# placement over what is recorded now: the admission, or why no card can take the ask
Place = Callable[[], Result[Admission, Refusal]]


@frozen(kw_only=True)
class Checked:
    """One check's answer: what it checked, and the refusal or what passed."""

    check: str  # "qualification", "model server", "permission", "limit", "quota", "placement"
    refusal: Refusal | None
    sentence: str  # the refusal's own sentence, or what passed
    admission: Admission | None = None  # placement's, when it passed

    @property
    def passed(self) -> bool:
        return self.refusal is None

    @classmethod
    def of(cls, check: str, refusal: Refusal | None, passed: str) -> Checked:
        """``check``'s answer: its refusal in the refusal's words, else ``passed``."""
        if refusal is None:
            return cls(check=check, refusal=None, sentence=passed)
        return cls.refused(check, refusal)

    @classmethod
    def refused(cls, check: str, refusal: Refusal) -> Checked:
        return cls(check=check, refusal=refusal, sentence=refusal.sentence)


@frozen(kw_only=True)
class AskFacts:
    """What the checks read of one ask, besides what is held and spent now."""

    shape: RequestShape  # the model's name as shown, its artifact, context and bytes
    task: Task
    qualification: Refusal | None  # the domain's task_refusal for it; None: claimed or proved
    unproved: bool = False  # asked to be served unproved: qualification is not checked
    # the model server's refusal of the cards (model_server.card_refusal) and, when it may
    # use them, what it is; None for both: the plane checks servers while placing
    server: Refusal | None = None
    server_said: str | None = None
    organisation: Organisation
    requester: Requester | None  # None: nobody was named, which only no policy lets pass


def _organisation_passed(asked: AskFacts, index: int) -> str:
    """What each organisation check says when it passes, in ``run_checks``' order."""
    who, ask = asked.requester, asked.shape
    if index == 0:
        if who is None:
            return "no organisation policy is configured: whoever asks may run"
        return f"{who.user} ({role_of(asked.organisation, who).value}) may run"
    if index == 1:
        return f"the organisation permits {ask.model}"
    if index == 2:
        return (
            f"a context of {ask.context_tokens} tokens and {ask.model_bytes} bytes of model are "
            "within the organisation's limits"
        )
    if who is None:
        return "no quota is counted for a request nobody is named for"
    return f"{who.user}'s quotas and their teams' have room"


def checks(asked: AskFacts, spent: Iterable[Spending], place: Place | None) -> Iterator[Checked]:
    """Each check in the one order, stopping after the first refusal; ``place`` None: the
    placement is made elsewhere (a fleet's controller), and is not a check here."""
    if not asked.unproved:
        proved = f"{asked.shape.model} is claimed or proved for {asked.task.value}"
        yield Checked.of(QUALIFICATION, asked.qualification, proved)
        if asked.qualification is not None:
            return
    if asked.server is not None:
        yield Checked.refused(MODEL_SERVER, asked.server)
        return
    if asked.server_said is not None:
        yield Checked.of(MODEL_SERVER, None, asked.server_said)
    organisation = run_checks(asked.organisation, asked.requester, asked.shape, tuple(spent))
    for index, (kind, outcome) in enumerate(organisation):
        refusal = outcome.failure() if isinstance(outcome, Failure) else None
        yield Checked.of(kind.value, refusal, _organisation_passed(asked, index))
        if refusal is not None:
            return
    if place is None:
        return
    match place():
        case Success(Admission() as admission):
            yield Checked(
                check=PLACEMENT, refusal=None, sentence=admission.placement.why, admission=admission
            )
        case Failure(Refusal() as refusal):
            yield Checked.refused(refusal.kind.value, refusal)


def decide(asked: AskFacts, spent: Iterable[Spending], place: Place) -> Result[Admission, Refusal]:
    """The first refusal of ``checks``, or the admission its placement made."""
    for checked in checks(asked, spent, place):
        if checked.refusal is not None:
            return Failure(checked.refusal)
        if checked.admission is not None:
            return Success(checked.admission)
    raise AssertionError  # checks end with a refusal or a placement


def first_refusal(found: Iterable[Checked]) -> Refusal | None:
    """The refusal that ended ``found``, if one did."""
    return next((c.refusal for c in found if c.refusal is not None), None)
