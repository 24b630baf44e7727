"""The model side's adapters, built from settings when a command needs them."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from attrs import frozen

from nodeau.apps.settings import Settings, utc_now
from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.domain.catalog import Catalog, CatalogEntry
from nodeau.ports.models import FetchProgress, ModelInspector, ModelStore, Publisher
from nodeau.ports.registry import ArtifactRegistry


@frozen(kw_only=True)
class ModelServices:
    settings: Settings
    store: ModelStore
    inspector: ModelInspector
    registry: ArtifactRegistry

    def catalog(self) -> Catalog:
        """The catalog in force: ``NODEAU_CATALOG``'s, else the shipped one with the home's
        own entries over it."""
        from nodeau.adapters.catalog_file import JsonCatalogFile, LayeredCatalogFiles

        s = self.settings
        if s.own_catalog == s.catalog:
            return JsonCatalogFile(s.catalog).load()
        return LayeredCatalogFiles(s.catalog, s.own_catalog).load()

    def own_catalog(self) -> Catalog:
        """The home's own entries (``models catalog add``'s): none before the first."""
        from nodeau.adapters.catalog_file import JsonCatalogFile

        own = self.settings.own_catalog
        return JsonCatalogFile(own).load() if own.exists() else Catalog()

    def keep_own_catalog(self, catalog: Catalog) -> None:
        """Write ``catalog`` as the home's own entries."""
        from nodeau.adapters.catalog_file import JsonCatalogFile

        JsonCatalogFile(self.settings.own_catalog).save(catalog)

    def sha256_of(self, path: Path) -> Sha256:
        """The SHA-256 of the file at ``path`` (OSError when it cannot be read)."""
        from nodeau.adapters.hashing import hash_file

        return hash_file(path)

    def publisher(self) -> Publisher:
        from nodeau.adapters.http_publisher import HttpPublisher

        return HttpPublisher.over_the_internet()

    def url_for(self, entry: CatalogEntry, file: ArtifactFile) -> str:
        from nodeau.adapters.http_publisher import fetch_url

        return fetch_url(entry.entry, file, base_url=self.settings.publisher_url)

    def progress_for(self, file: ArtifactFile) -> AbstractContextManager[FetchProgress]:
        from nodeau.adapters.progress import fetch_progress

        return fetch_progress(file.path)


def build(s: Settings) -> ModelServices:
    """Every adapter of the model side, configured by the settings."""
    from nodeau.adapters.fs_store import FilesystemModelStore
    from nodeau.adapters.gguf_inspector import GgufModelInspector
    from nodeau.adapters.sqlite_registry import SqliteRegistry

    return ModelServices(
        settings=s,
        store=FilesystemModelStore(
            s.models_root, s.machine, reserve_bytes=s.reserve_bytes, clock=utc_now
        ),
        inspector=GgufModelInspector(),
        registry=SqliteRegistry(s.registry_path),
    )
