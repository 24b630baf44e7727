"""The model side as the apps use it: the store, the inspector, the registry, the catalogs
and the publisher, each given by a composition root (``apps.models.bootstrap``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from attrs import frozen

from nodeau.apps.settings import Settings
from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.domain.catalog import Catalog, CatalogEntry
from nodeau.ports.models import FetchProgress, ModelInspector, ModelStore, Publisher
from nodeau.ports.registry import ArtifactRegistry


@frozen(kw_only=True)
class ModelServices:
    """What the model commands, the planes and the agent use of the model side."""

    settings: Settings
    store: ModelStore
    inspector: ModelInspector
    registry: ArtifactRegistry
    # the catalog in force: NODEAU_CATALOG's, else the shipped one with the home's own over it
    catalog: Callable[[], Catalog]
    own_catalog: Callable[[], Catalog]  # the home's own entries: none before the first
    keep_own_catalog: Callable[[Catalog], None]  # write the home's own entries
    sha256_of: Callable[[Path], Sha256]  # OSError when the file cannot be read
    publisher: Callable[[], Publisher]
    url_for: Callable[[CatalogEntry, ArtifactFile], str]  # where a catalog file is fetched
    progress_for: Callable[[ArtifactFile], AbstractContextManager[FetchProgress]]
