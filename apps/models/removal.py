"""Deleting this machine's copy of a model: what relies on it, then the domain's decision.

Why it is so: docs/adr/decisions/apps.md (models/removal.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attrs import frozen

from nodeau.apps.models.actions import Resolved, known_here, model_names
from nodeau.domain.aliases import AliasBook
from nodeau.domain.catalog import Catalog
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.removal import (
    KnownArtifact,
    Reliance,
    RelianceKind,
    Removal,
    RemovalRefused,
    plan_removal,
)
from nodeau.domain.workloads import WorkloadKind, holds_gpu
from nodeau.ports.models import ModelStore


@frozen(kw_only=True)
class RemovalReport:
    """What ``models rm`` did: the decision carried out, and the bytes it freed."""

    removal: Removal
    freed_bytes: int


def workload_reliances(records: Iterable[WorkloadRecord]) -> tuple[Reliance, ...]:
    """Every recorded workload in a state that holds or will use its model's files."""
    return tuple(
        Reliance(
            kind=RelianceKind.BATCH
            if r.workload.kind is WorkloadKind.BATCH
            else RelianceKind.SERVICE,
            artifact_id=r.workload.artifact_id,
            name=r.workload.name,
            state=r.workload.state.value,
        )
        for r in records
        if holds_gpu(r.workload.state)
    )


def remove_model(
    resolved: Resolved,
    *,
    store: ModelStore,
    book: AliasBook,
    catalog: Catalog,
    reliances: Iterable[Reliance],
    on_wait: Callable[[str], None],
) -> RemovalReport | RemovalRefused:
    """Delete this machine's files of ``resolved`` unless something relies on them."""
    target = KnownArtifact(artifact=resolved.artifact, names=resolved.names)
    known = [
        KnownArtifact(artifact=a, names=model_names(a, book, catalog))
        for a in known_here(book, catalog).values()
    ]
    with store.exclusive_fetch(on_wait):
        held = {f.sha256.hex for f in store.files()}
        decided = plan_removal(target, known=known, held=held, reliances=reliances)
        if isinstance(decided, RemovalRefused):
            return decided
        freed = sum(store.remove(f.sha256) for f in decided.delete)
    return RemovalReport(removal=decided, freed_bytes=freed)
