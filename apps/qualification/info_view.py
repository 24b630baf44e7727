"""``nodeau model info`` as both planes show it: one view, the same words and JSON keys.

Why it is so: docs/adr/decisions/apps-planes.md (info_view.py).
"""

from __future__ import annotations

from attrs import frozen

from nodeau.domain.memory import MeasuredTable
from nodeau.domain.model_info import ContextEstimate, ModelInfo, ModelSummary
from nodeau.domain.qualification import CapabilityState

THIS_MACHINE = "this machine's verified copy"
MEASURED = "measured"


@frozen(kw_only=True)
class MeasuredView:
    """One configuration whose peak was measured on a card: what admission uses, labelled
    measured, where the artifact, card model and configuration match."""

    artifact_id: str
    gpu_model: str
    config_key: str
    peak_bytes: int
    source: str  # "measured": a card's own reading, never mixed with an estimate


@frozen(kw_only=True)
class ModelInfoView:
    """``nodeau model info``: what the model file declares, its estimated peaks, the peaks
    measured on cards, and each capability's state, with where each comes from."""

    model: str
    names: tuple[str, ...]
    artifact_id: str  # SHA-256 hex
    size_bytes: int
    summary: ModelSummary | None  # None: no verified copy could be read
    architecture_from: str | None  # whose verified copy the architecture values come from
    note: str | None  # what this plane could not read here, in one line
    estimates: tuple[ContextEstimate, ...]  # each labelled estimated
    measured: tuple[MeasuredView, ...]  # an empty tuple is a real answer
    capabilities: tuple[CapabilityState, ...]
    qualified: str | None  # when, on what and by which runtime it was last qualified


def measured_views(table: MeasuredTable, artifact_id: str) -> tuple[MeasuredView, ...]:
    """Every configuration measured for the artifact, with the peak admission uses there."""
    views = []
    for key in table.configurations_of(artifact_id):
        found = table.lookup(key)
        if found is not None:
            views.append(
                MeasuredView(
                    artifact_id=key.artifact_id,
                    gpu_model=key.gpu_model,
                    config_key=key.config_key,
                    peak_bytes=found.peak_bytes,
                    source=MEASURED,
                )
            )
    return tuple(views)


def info_view(
    info: ModelInfo,
    *,
    model: str,
    names: tuple[str, ...],
    table: MeasuredTable,
    architecture_from: str,
    note: str | None = None,
) -> ModelInfoView:
    """The view of a model whose architecture values were read (``architecture_from``)."""
    return ModelInfoView(
        model=model,
        names=names,
        artifact_id=info.artifact_id,
        size_bytes=info.size_bytes,
        summary=info.summary,
        architecture_from=architecture_from,
        note=note,
        estimates=info.estimates,
        measured=measured_views(table, info.artifact_id),
        capabilities=info.capabilities,
        qualified=info.qualified,
    )


def unread_view(
    *,
    model: str,
    names: tuple[str, ...],
    artifact_id: str,
    size_bytes: int,
    table: MeasuredTable,
    capabilities: tuple[CapabilityState, ...],
    qualified: str | None,
    note: str,
) -> ModelInfoView:
    """The view of a model no verified copy of which could be read: no architecture values
    and no estimate (``note`` says why), everything else that is known."""
    return ModelInfoView(
        model=model,
        names=names,
        artifact_id=artifact_id,
        size_bytes=size_bytes,
        summary=None,
        architecture_from=None,
        note=note,
        estimates=(),
        measured=measured_views(table, artifact_id),
        capabilities=capabilities,
        qualified=qualified,
    )
