"""Adding a person's own catalog entry from a GGUF file they hold (``nodeau models catalog
add``): its size and SHA-256 computed here, its summary read from the file, its tasks and
capabilities what qualification proved on those bytes (``domain.catalog.own_entry``).
"""

from __future__ import annotations

from pathlib import Path

from nodeau.apps.models.services import ModelServices
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import (
    ArchitectureSummary,
    CatalogEntry,
    listing_problem,
    own_entry,
    with_entry,
)
from nodeau.domain.qualification import claimed_capabilities
from nodeau.ports.models import CatalogError, ModelError

NOT_STATED = "not stated"  # the parameter count, when the person gives none


def add_to_catalog(
    path: Path,
    *,
    name: str,
    repo: str,
    revision: str,
    publisher: str | None,
    file_path: str | None,
    parameters: str | None,
    models: ModelServices,
) -> CatalogEntry:
    """Add the entry for ``path`` (published as ``repo``'s ``file_path`` at ``revision``) to
    the home's own catalog file; ModelError with one line when it cannot be added."""
    summary = models.inspector.inspect(path)  # a malformed file is refused here
    try:
        digest: Sha256 = models.sha256_of(path)
        size = path.stat().st_size
        file = ArtifactFile(path=file_path or path.name, size_bytes=size, sha256=digest)
        entry = CuratedEntry(
            name=name,
            publisher=publisher or repo.split("/", maxsplit=1)[0],
            repo=repo,
            revision=revision,
            files=(file,),
        )
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror})") from exc
    except ValueError as exc:
        raise ModelError(f"{name}: {exc}") from exc
    about = ArchitectureSummary(
        architecture=summary.architecture.name,
        parameters=parameters or NOT_STATED,
        context_length=summary.architecture.context_length,
        quantisation=summary.declared_quantisation,
    )
    listed = listing_problem(models.catalog(), entry)  # no name or bytes listed twice
    if listed is not None:
        raise ModelError(listed)
    proved = claimed_capabilities(models.registry.evidence().for_artifact(digest))
    made = own_entry(entry, about, proved)
    if isinstance(made, str):
        raise ModelError(made)
    updated = with_entry(models.own_catalog(), made)
    if isinstance(updated, str):  # listed in the own file, so in force too: seen above
        raise CatalogError(updated)
    models.keep_own_catalog(updated)
    return made
