"""The Models section's qualification: each capability of each model this machine holds, in
the words of ``nodeau model info``.

Decisions:

* The same source as ``nodeau model info`` (``apps.cli.models.info`` through
  ``apps.models.describe_model``): the newest qualification evidence kept for the artifact
  in this machine's registry, and what the catalog entry listing its bytes claims
  (``catalog_claims``), turned into states by the domain's ``capability_states`` and the
  "qualified" line by ``qualified_line``. Nothing is computed apart, so a capability reads
  ``passed``, ``failed``, ``not applicable``, ``catalog``, ``not probed`` or ``never
  qualified`` exactly as the CLI prints it, with the same evidence.
* A model is an artifact this machine knows (an alias's or the catalog's, ``known_here``)
  with at least one of its files in this machine's store, whether verified or not: the
  states do not depend on the bytes (``model info`` also reads the architecture, which
  needs a verified copy; the dashboard does not show it, so it never opens a model file).
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from nodeau.apps.models import known_here, model_names
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
