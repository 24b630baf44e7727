"""``nodeau model qualify`` on the one-machine plane: the parts of ``apps.qualify`` wired to
this machine's adapters, and the evidence shown as a ``QualificationView``."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from nodeau.apps.planes.plane import QualificationView, Refused
from nodeau.apps.planes.qualification_view import qualification_view
from nodeau.apps.settings import Settings
from nodeau.domain.refusals import Refusal

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts
    from nodeau.apps.serving import Rules


def qualify(
    parts: MachineParts,
    settings: Settings,
    clock: Callable[[], datetime],
    rules: Rules,
    model: str,
    context_tokens: int | None,
    seed: int | None,
) -> QualificationView | Refused:
    from nodeau.adapters.probe_client import run_probes
    from nodeau.adapters.runtime_buffers import reported_total
    from nodeau.adapters.runtime_version import runtime_name
    from nodeau.apps.models import resolve_model
    from nodeau.apps.qualify import QualifyParts
    from nodeau.apps.qualify import qualify as qualify_here

    models = parts.models
    resolved = resolve_model(model, models.registry.book(), models.catalog())
    qualify_parts = QualifyParts(
        models=models,
        inventory=parts.inventory,
        state=parts.state,
        runtime=parts.runtime,
        server=parts.server,
        marks=parts.marks.read(),
        log_dir=settings.log_dir,
        clock=clock,
        probe=run_probes,
        reported_bytes=reported_total,
        runtime_name=runtime_name,
        rules=rules,
    )
    drawn = seed if seed is not None else random.SystemRandom().randrange(2**32)
    done = qualify_here(resolved, context_tokens, qualify_parts, drawn)
    if isinstance(done, Refusal):
        return Refused(name=resolved.display_name, refusal=done)
    return qualification_view(resolved.display_name, done)
