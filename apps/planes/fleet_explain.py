"""``nodeau plan explain`` on a fleet: the checks ``nodeau run`` and the controller make, asked
here over what the cluster says now, creating nothing.

Why it is so: docs/adr/decisions/apps-planes.md (fleet_explain.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from nodeau.apps.planes.organisation import run_check_views
from nodeau.apps.planes.plane import CheckView, Explanation, RunAsk
from nodeau.domain.limits import WorkloadAsk
from nodeau.domain.model_info import runtime_config
from nodeau.domain.organisation import Organisation, Requester, Spending
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.ports.cluster import MachineReport

PLACEMENT = (
    "the controller places it when asked: the cards' memory, the plan's bounds and the "
    "machines drained or unreachable then decide (nodeau run waits for its answer)"
)


def _refused(check: str, refusal: Refusal) -> CheckView:
    return CheckView(check=check, passed=False, sentence=refusal.sentence, code=refusal.code.value)


def explain_on_fleet(
    *,
    plane: str,
    ask: RunAsk,
    requester: Requester,
    organisation: Organisation,
    spent: Iterable[Spending],
    unproved: Refusal | None,
    reports: tuple[MachineReport, ...],
) -> Explanation:
    """Whether ``ask`` passes the checks made before placement, and the first that refuses."""
    from nodeau.apps.models import UnknownModel
    from nodeau.apps.planes.fleet_qualify import fleet_model

    checks: list[CheckView] = []
    refusal: Refusal | None = None
    if unproved is not None:
        checks.append(_refused("qualification", unproved))
        refusal = unproved
    model = ask.model
    try:
        found = fleet_model(ask.model, reports)
    except UnknownModel as exc:
        missing = Refusal.of(ReasonCode.NO_VERIFIED_COPY, exc.one_line())
        checks.append(_refused("capacity", missing))
        refusal = refusal or missing
    else:
        config = runtime_config(found.summary, ask.task, ask.context_tokens)
        model = found.name
        shape = WorkloadAsk(
            model=model,
            artifact_id=found.artifact,
            context_tokens=config.context_tokens,
            model_bytes=max(found.size_bytes, 1),
        )
        views = run_check_views(organisation, requester, shape, spent)
        checks.extend(views)
        first = next((v for v in views if not v.passed), None)
        if refusal is None and first is not None and first.code is not None:
            refusal = Refusal.of(ReasonCode(first.code), first.sentence)
    if refusal is None:
        checks.append(CheckView(check="placement", passed=True, sentence=PLACEMENT, code=None))
    return Explanation(
        plane=plane,
        user=requester.user,
        model=model,
        context_tokens=ask.context_tokens,
        admitted=refusal is None,
        refusal=refusal,
        checks=tuple(checks),
    )
