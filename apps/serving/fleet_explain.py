"""``nodeau run`` and ``nodeau plan explain`` on a fleet: the domain's checks asked here, over
what the cluster says now, before anything is created; the controller places.

Why it is so: docs/adr/decisions/apps-planes.md (serving/fleet_explain.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from nodeau.apps.models.actions import UnknownModel
from nodeau.apps.qualification.fleet_qualify import fleet_model
from nodeau.apps.serving.commands import CheckView, Explanation, RunAsk
from nodeau.apps.serving.machine_explain import check_view
from nodeau.domain.artifacts import Sha256
from nodeau.domain.catalog import Catalog, catalog_claims
from nodeau.domain.decision import PLACEMENT, Asked, Checked, checks, first_refusal
from nodeau.domain.limits import RequestShape
from nodeau.domain.model_info import runtime_config
from nodeau.domain.organisation import Organisation, Requester, Spending
from nodeau.domain.qualification import EvidenceBook, task_refusal
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.ports.cluster import MachineReport

PLACED = (
    "the controller places it when asked: the cards' memory, the plan's bounds and the "
    "machines drained or unreachable then decide (nodeau run waits for its answer)"
)


@frozen(kw_only=True)
class FleetChecks:
    """The model as a person reads it, and the checks made before placement, in order."""

    model: str
    checked: tuple[Checked, ...]
    known: bool  # some machine holds the model verified (else the controller refuses it)

    @property
    def refusal(self) -> Refusal | None:
        return first_refusal(self.checked)


def fleet_checks(
    *,
    ask: RunAsk,
    requester: Requester | None,
    organisation: Organisation,
    spent: Iterable[Spending],
    reports: tuple[MachineReport, ...],
    proved: tuple[Catalog, EvidenceBook] | None,
) -> FleetChecks:
    """The checks made before placement, in the domain's one order (``proved``: the catalog
    and the evidence kept in the cluster; None when this connection cannot read them, and
    the controller checks qualification alone)."""
    try:
        found = fleet_model(ask.model, reports)
    except UnknownModel as exc:
        missing = Refusal.of(ReasonCode.NO_VERIFIED_COPY, exc.one_line())
        return FleetChecks(
            model=ask.model, checked=(Checked.refused(missing.kind.value, missing),), known=False
        )
    config = runtime_config(found.summary, ask.task, ask.context_tokens)
    qualification = None
    if proved is not None and not ask.unproved:
        catalog, book = proved
        qualification = task_refusal(
            catalog=catalog_claims(catalog, found.artifact),
            evidence=book.for_artifact(Sha256(hex=found.artifact)),
            task=ask.task,
            model=found.name,
        )
    asked = Asked(
        shape=RequestShape(
            model=found.name,
            artifact_id=found.artifact,
            context_tokens=config.context_tokens,
            model_bytes=max(found.size_bytes, 1),
        ),
        task=ask.task,
        qualification=qualification,
        unproved=ask.unproved or proved is None,
        organisation=organisation,
        requester=requester,
    )
    return FleetChecks(model=found.name, checked=tuple(checks(asked, spent, None)), known=True)


def explain_on_fleet(*, plane: str, ask: RunAsk, user: str, found: FleetChecks) -> Explanation:
    """Whether ``ask`` passes the checks made before placement, and the first that refuses."""
    refusal = found.refusal
    views = [check_view(c) for c in found.checked]
    if refusal is None:
        views.append(CheckView(check=PLACEMENT, passed=True, sentence=PLACED, code=None))
    return Explanation(
        plane=plane,
        user=user,
        model=found.model,
        context_tokens=ask.context_tokens,
        admitted=refusal is None,
        refusal=refusal,
        checks=tuple(views),
    )
