"""``nodeau plan explain`` on the one-machine plane: the checks ``nodeau run`` would make now,
over what is recorded now, without recording or starting anything.

It walks the very decision ``run`` takes (``model_servers.run_decision``) over a snapshot,
so each refusal shown is the one ``run`` would print, word for word.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from nodeau.apps.models.actions import resolve_model
from nodeau.apps.serving.commands import CheckView, Explanation, RunAsk, workload_name
from nodeau.apps.serving.model_servers import RunRequest, run_decision
from nodeau.domain.decision import Checked, first_refusal
from nodeau.domain.refusals import Refusal
from nodeau.domain.workloads import WorkloadKind

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts
    from nodeau.apps.serving.model_servers import Rules

PLANE = "this machine"


def check_view(checked: Checked) -> CheckView:
    """One domain check as ``plan explain`` shows it."""
    refusal = checked.refusal
    return CheckView(
        check=checked.check,
        passed=refusal is None,
        sentence=checked.sentence,
        code=None if refusal is None else refusal.code.value,
    )


def explain_run(parts: MachineParts, ask: RunAsk, rules: Rules, now: datetime) -> Explanation:
    """Whether ``ask`` would be admitted on this machine now, and each check's answer."""
    models = parts.models
    resolved = resolve_model(ask.model, models.registry.book(), models.catalog())
    request = RunRequest.of(ask, workload_name(ask.name, resolved.display_name))
    decision = run_decision(
        resolved,
        request,
        kind=WorkloadKind.SERVICE,
        models=models,
        inventory=parts.inventory,
        marks=parts.marks.read(),
        rules=rules,
        server=parts.server,
        now=now,
    )
    if isinstance(decision, Refusal):  # no verified copy here: nothing else can be read
        found: tuple[Checked, ...] = (Checked.refused(decision.kind.value, decision),)
    else:
        found = tuple(decision.checks(parts.state.snapshot()))
    refusal = first_refusal(found)
    return Explanation(
        plane=PLANE,
        user=rules.requester.user,
        model=resolved.display_name,
        context_tokens=ask.context_tokens,
        admitted=refusal is None,
        refusal=refusal,
        checks=tuple(check_view(c) for c in found),
    )
