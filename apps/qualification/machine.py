"""``QualificationCommands`` on one machine: ``machine_qualify`` wired to this machine's
adapters, and ``model info`` from its registry, catalog and verified copy."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from attrs import frozen

from nodeau.apps.models.actions import describe_model, resolve_model
from nodeau.apps.qualification.commands import QualificationView, qualification_view
from nodeau.apps.qualification.info_view import THIS_MACHINE, ModelInfoView, info_view
from nodeau.apps.qualification.machine_qualify import QualifyParts
from nodeau.apps.qualification.machine_qualify import qualify as qualify_here
from nodeau.apps.serving.commands import Refused
from nodeau.apps.settings import Settings
from nodeau.domain.catalog import catalog_claims
from nodeau.domain.refusals import Refusal

if TYPE_CHECKING:
    from nodeau.apps.planes.machine import MachineParts
    from nodeau.apps.serving.model_servers import Rules


def qualify(
    parts: MachineParts,
    settings: Settings,
    clock: Callable[[], datetime],
    rules: Rules,
    model: str,
    context_tokens: int | None,
    seed: int | None,
) -> QualificationView | Refused:
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
        probe=parts.qualifying.probe,
        reported_bytes=parts.qualifying.reported_bytes,
        runtime_name=parts.qualifying.runtime_name,
        rules=rules,
        starter=parts.starter,
    )
    drawn = seed if seed is not None else random.SystemRandom().randrange(2**32)
    done = qualify_here(resolved, context_tokens, qualify_parts, drawn)
    if isinstance(done, Refusal):
        return Refused(name=resolved.display_name, refusal=done)
    return qualification_view(resolved.display_name, done)


@frozen(kw_only=True)
class ThisMachineQualification:
    """``QualificationCommands`` where the plane is this machine; ``rules`` are the plan's
    and the organisation's, asked when a qualification starts."""

    _settings: Settings
    _parts: MachineParts
    _clock: Callable[[], datetime]
    _rules: Callable[[], Rules]

    def qualify(
        self, model: str, context_tokens: int | None, seed: int | None = None
    ) -> QualificationView | Refused:
        return qualify(
            self._parts, self._settings, self._clock, self._rules(), model, context_tokens, seed
        )

    def info(self, model: str) -> ModelInfoView:
        """From this machine's registry, catalog and verified copy (none: a one-line error)."""
        models = self._parts.models
        catalog = models.catalog()
        resolved = resolve_model(model, models.registry.book(), catalog, models.store.files())
        described = describe_model(
            resolved,
            store=models.store,
            inspector=models.inspector,
            registry=models.registry,
            allowances=self._settings.allowances,
            catalog_capabilities=catalog_claims(catalog, resolved.artifact.id.hex),
        )
        return info_view(
            described,
            model=resolved.display_name,
            names=resolved.names,
            table=models.registry.measurements(),
            architecture_from=THIS_MACHINE,
        )
