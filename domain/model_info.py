"""Model info: what a model file declares, and what it is predicted to take.

Why it is so: docs/adr/decisions/domain.md (model_info.py).
"""

from __future__ import annotations

from attrs import field, frozen

from nodeau.domain.allowances import Allowances
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.checks import not_negative
from nodeau.domain.memory import (
    Architecture,
    MeasuredKey,
    MeasuredTable,
    Prediction,
    RuntimeConfig,
    estimate_peak,
)
from nodeau.domain.qualification import CapabilityState
from nodeau.domain.tasks import Task

INFO_CONTEXTS = (4096, 8192, 32768)


@frozen(kw_only=True)
class ModelSummary:
    """The facts a GGUF file declares about itself."""

    architecture: Architecture
    name: str | None = None
    file_type: str | None = None
    quantisation: str
    tensor_count: int = field(validator=not_negative)
    tensor_bytes: int = field(validator=not_negative)
    has_tokenizer: bool
    has_chat_template: bool
    # the weights by layer, for a split across cards (None: summarised before it was read)
    layers: LayerWeights | None = None

    @property
    def declared_quantisation(self) -> str:
        """The quantisation its maker declared (``general.file_type``, e.g. Q4_K_M); the
        tensor type holding most bytes when none is declared."""
        declared = self.file_type
        if declared is None or declared.startswith(("unknown", "GUESSED")):
            return self.quantisation
        return declared.removeprefix("MOSTLY_").removeprefix("ALL_")

    @property
    def quantisation_label(self) -> str:
        """The declared quantisation, with the tensor type holding most bytes when that
        differs (a Q4_K_M file may keep a large vocabulary's embedding in Q8_0)."""
        declared = self.declared_quantisation
        if declared == self.quantisation:
            return declared
        return f"{declared} (most bytes {self.quantisation})"


@frozen(kw_only=True)
class ContextEstimate:
    """The estimated peak at one context size."""

    context_tokens: int
    prediction: Prediction


@frozen(kw_only=True)
class ModelInfo:
    """Everything ``nodeau model info`` prints for one artifact."""

    artifact_id: str
    size_bytes: int
    summary: ModelSummary
    estimates: tuple[ContextEstimate, ...]
    measured: tuple[MeasuredKey, ...]
    capabilities: tuple[CapabilityState, ...] = ()
    qualified: str | None = None  # when, on what and by which runtime it was qualified


def info_contexts(summary: ModelSummary) -> tuple[int, ...]:
    """The context sizes worth showing: the usual ones up to the model's own, and its own."""
    trained = summary.architecture.context_length
    sizes = {c for c in INFO_CONTEXTS if c < trained}
    sizes.add(trained)
    return tuple(sorted(sizes))


def model_info(
    *,
    artifact_id: str,
    size_bytes: int,
    summary: ModelSummary,
    table: MeasuredTable,
    allowances: Allowances,
    task: Task = Task.CHAT,
) -> ModelInfo:
    """Predictions at a few context sizes (estimated), and what was really measured."""
    estimates = tuple(
        ContextEstimate(
            context_tokens=ctx,
            prediction=estimate_peak(
                summary.architecture,
                size_bytes,
                RuntimeConfig(context_tokens=ctx, task=task),
                allowances,
            ),
        )
        for ctx in info_contexts(summary)
    )
    return ModelInfo(
        artifact_id=artifact_id,
        size_bytes=size_bytes,
        summary=summary,
        estimates=estimates,
        measured=table.configurations_of(artifact_id),
    )


DEFAULT_CONTEXT = 4096


def runtime_config(summary: ModelSummary, task: Task, context_tokens: int | None) -> RuntimeConfig:
    """The configuration a model server really runs: one slot, the asked context, else the
    model's own capped at ``DEFAULT_CONTEXT``."""
    context = context_tokens or min(summary.architecture.context_length, DEFAULT_CONTEXT)
    return RuntimeConfig(context_tokens=context, parallel=1, task=task)
