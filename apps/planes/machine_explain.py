"""``nodeau plan explain`` on the one-machine plane: the checks ``nodeau run`` would make now,
over what is recorded now, without recording or starting anything.

The same decision ``run`` takes (``apps.serving.run_decision``) is asked of a snapshot and
its answer thrown away, so the refusal shown is the one ``run`` would print, word for word.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from returns.result import Failure, Success

from nodeau.apps.planes.organisation import run_check_views
from nodeau.apps.planes.plane import CheckView, Explanation, RunAsk
from nodeau.domain.limits import WorkloadAsk
from nodeau.domain.model_info import runtime_config
from nodeau.domain.records import Admission, spending
from nodeau.domain.refusals import Refusal
from nodeau.domain.workloads import WorkloadKind

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts
    from nodeau.apps.serving import Rules

PLANE = "this machine"


def _refused(check: str, refusal: Refusal) -> CheckView:
    return CheckView(check=check, passed=False, sentence=refusal.sentence, code=refusal.code.value)


def explain_run(parts: MachineParts, ask: RunAsk, rules: Rules, now: datetime) -> Explanation:
    """Whether ``ask`` would be admitted on this machine now, and each check's answer."""
    from nodeau.apps.models import resolve_model
    from nodeau.apps.planes.machine import workload_name
    from nodeau.apps.serving import RunRequest, run_decision
    from nodeau.domain.catalog import catalog_claims
    from nodeau.domain.model_server import abilities_text, card_refusal
    from nodeau.domain.qualification import task_refusal

    models = parts.models
    resolved = resolve_model(ask.model, models.registry.book(), models.catalog())
    name = workload_name(ask.name, resolved)
    checks: list[CheckView] = []

    def answer(refusal: Refusal | None) -> Explanation:
        return Explanation(
            plane=PLANE,
            user=rules.requester.user,
            model=resolved.display_name,
            context_tokens=ask.context_tokens,
            admitted=refusal is None,
            refusal=refusal,
            checks=tuple(checks),
        )

    if not ask.unproved:
        unproved = task_refusal(
            catalog=catalog_claims(models.catalog(), resolved.artifact.id.hex),
            evidence=models.registry.evidence().for_artifact(resolved.artifact.id),
            task=ask.task,
            model=resolved.display_name,
        )
        if unproved is not None:
            checks.append(_refused("qualification", unproved))
            return answer(unproved)
        checks.append(
            CheckView(
                check="qualification",
                passed=True,
                sentence=f"{resolved.display_name} is claimed or proved for {ask.task.value}",
                code=None,
            )
        )
    server = parts.server
    unusable = card_refusal(server, parts.inventory.read().real_cards, on_cpu=ask.on_cpu)
    if unusable is not None:
        checks.append(_refused("model server", unusable))
        return answer(unusable)
    checks.append(
        CheckView(check="model server", passed=True, sentence=abilities_text(server), code=None)
    )
    request = RunRequest(
        name=name,
        task=ask.task,
        context_tokens=ask.context_tokens,
        recovery=ask.recovery,
        recovery_after=ask.recovery_after,
        on_cpu=ask.on_cpu,
    )
    decision = run_decision(
        resolved,
        request,
        kind=WorkloadKind.SERVICE,
        models=models,
        inventory=parts.inventory,
        marks=parts.marks.read(),
        rules=rules,
        server=server,
        now=now,
    )
    if isinstance(decision, Refusal):
        checks.append(_refused("capacity", decision))
        return answer(decision)
    decide, _simulated = decision
    path = models.store.verified_path(resolved.artifact.files[0].sha256)
    assert path is not None  # run_decision found it
    config = runtime_config(models.inspector.inspect(path), ask.task, ask.context_tokens)
    wanted = WorkloadAsk(
        model=resolved.display_name,
        artifact_id=resolved.artifact.id.hex,
        context_tokens=config.context_tokens,
        model_bytes=resolved.artifact.size_bytes,
    )
    snapshot = parts.state.snapshot()
    organisation = run_check_views(
        rules.organisation, rules.requester, wanted, spending(snapshot.workloads)
    )
    checks.extend(organisation)
    match decide(snapshot):
        case Success(Admission() as admission):
            checks.append(
                CheckView(
                    check="placement", passed=True, sentence=admission.placement.why, code=None
                )
            )
            return answer(None)
        case Failure(Refusal() as refusal):
            if all(c.passed for c in organisation):
                checks.append(_refused(refusal.kind.value, refusal))
            return answer(refusal)
    raise AssertionError("a decision answers a Result")
