"""What ``nodeau model qualify|info`` shows: the views and ``QualificationCommands``.

A qualification starts the model by the normal admission, measures its memory, probes each
capability and keeps the evidence under its artifact; ``info`` reads the newest evidence.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from attrs import frozen

from nodeau.apps.serving.commands import Refused
from nodeau.domain.memory import MeasuredTable
from nodeau.domain.model_info import ContextEstimate, ModelInfo, ModelSummary
from nodeau.domain.probes import probes_for
from nodeau.domain.qualification import (
    Capability,
    CapabilityState,
    MemorySource,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
    claimed_capabilities,
)
from nodeau.domain.tasks import Task
from nodeau.ports.errors import NodeauError


@frozen(kw_only=True)
class ProbeView:
    """One capability's result in a qualification, with its evidence."""

    capability: str
    outcome: str  # "passed", "failed" or "not applicable"
    asked: str
    answered: str
    why: str


@frozen(kw_only=True)
class MemoryView:
    """The peak memory one server of a qualification took, and how it was read."""

    task: str
    config: str
    peak_bytes: int
    source: str  # "nvml", or the runtime's reported buffers on simulated hardware
    measured: bool  # recorded as a measurement admission uses (a card's own reading)


@frozen(kw_only=True)
class QualificationView:
    """``nodeau model qualify``: one run, what each capability did, what the model claims."""

    model: str
    artifact: str  # SHA-256 hex
    card: str
    runtime: str
    at: datetime
    context_tokens: int
    memory: tuple[MemoryView, ...]
    probes: tuple[ProbeView, ...]
    claims: tuple[str, ...]  # the capabilities that passed
    seed: int | None  # what the probes' content was drawn from (--seed repeats the run)


class QualificationUnavailable(NodeauError):
    """This connection to the plane cannot keep qualification evidence."""


class QualificationCommands(Protocol):
    """``nodeau model qualify`` and ``nodeau model info`` on one plane."""

    def qualify(
        self, model: str, context_tokens: int | None, seed: int | None = None
    ) -> QualificationView | Refused:
        """Start the model by the normal admission, watch its memory, probe each
        capability, stop what was started, and keep the evidence under its artifact."""
        ...

    def info(self, model: str) -> ModelInfoView:
        """What ``model`` (a name this plane knows, an artifact id or prefix) declares, its
        estimated peaks, the peaks measured on this plane's cards, and each capability's
        state from this plane's newest qualification of its artifact (never an alias's
        earlier one) and the catalog."""
        ...


def qualification_view(model: str, evidence: QualificationEvidence) -> QualificationView:
    """What a person reads of one qualification run."""
    claimed = claimed_capabilities(evidence)
    return QualificationView(
        model=model,
        artifact=evidence.artifact_id.hex,
        card=evidence.gpu_model,
        runtime=evidence.runtime,
        at=evidence.at,
        context_tokens=evidence.context_tokens,
        memory=tuple(
            MemoryView(
                task=m.task.value,
                config=m.config_key,
                peak_bytes=m.peak_bytes,
                source=m.source.value,
                measured=m.source is MemorySource.NVML,
            )
            for m in evidence.memory
        ),
        probes=tuple(
            ProbeView(
                capability=p.capability.value,
                outcome=p.outcome.value,
                asked=p.asked,
                answered=p.answered,
                why=p.why,
            )
            for p in evidence.probes
        ),
        claims=tuple(c.value for c in Capability if c in claimed),
        seed=evidence.seed,
    )


class Probe(Protocol):
    """Each probe's result for a server at a base URL, its task, model id and randomness,
    each request with ``headers`` (the server's key)."""

    def __call__(
        self,
        base_url: str,
        task: Task,
        model: str,
        rng: random.Random,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[ProbeResult, ...]: ...


def not_started(task: Task, why: str) -> tuple[ProbeResult, ...]:
    """Every probe a server for ``task`` would have answered, failed: it never served."""
    return tuple(
        ProbeResult(
            capability=c,
            outcome=ProbeOutcome.FAILED,
            asked=f"start the model server for {task.value}",
            answered=why,
            why=f"the model server did not start for {task.value}",
        )
        for c in probes_for(task)
    )


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
