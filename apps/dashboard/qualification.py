"""The Models section's qualification: each capability of each model this machine holds, in
the words of ``nodeau model info``.

Why it is so: docs/adr/decisions/apps-dashboard.md (qualification.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from nodeau.apps.models.actions import known_here, model_names
from nodeau.domain.aliases import AliasBook
from nodeau.domain.cache import CachedFile
from nodeau.domain.catalog import Catalog, catalog_claims
from nodeau.domain.qualification import (
    CapabilityState,
    EvidenceBook,
    capability_states,
    qualified_line,
)


@frozen(kw_only=True)
class ModelQualification:
    """One model's capabilities as ``nodeau model info`` says them."""

    names: tuple[str, ...]
    artifact: str
    qualified: str | None  # when, on what and by which runtime; None: never qualified
    capabilities: tuple[CapabilityState, ...]


def model_qualifications(
    files: Iterable[CachedFile], book: AliasBook, catalog: Catalog, evidence: EvidenceBook
) -> tuple[ModelQualification, ...]:
    """Each model with a file on this machine, by its first name (then its artifact id)."""
    held = {f.sha256 for f in files}
    found = []
    for artifact in known_here(book, catalog).values():
        if not any(f.sha256 in held for f in artifact.files):
            continue
        newest = evidence.for_artifact(artifact.id)
        found.append(
            ModelQualification(
                names=model_names(artifact, book, catalog),
                artifact=artifact.id.hex,
                qualified=None if newest is None else qualified_line(newest),
                capabilities=capability_states(newest, catalog_claims(catalog, artifact.id.hex)),
            )
        )
    return tuple(sorted(found, key=lambda m: (m.names[:1], m.artifact)))
