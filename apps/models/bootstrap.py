"""The model side's composition: its adapters built from the settings, for the roots of the
CLI, the agent and the dashboard; a test passes its own store, inspector or registry. Each
adapter is imported when first used, so a command that reads no model imports none."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from nodeau.apps.models.services import ModelServices
from nodeau.apps.settings import Settings, utc_now
from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.domain.catalog import Catalog, CatalogEntry
from nodeau.ports.models import FetchProgress, ModelInspector, ModelStore, Publisher
from nodeau.ports.registry import ArtifactRegistry


def build(
    s: Settings,
    *,
    store: ModelStore | None = None,
    inspector: ModelInspector | None = None,
    registry: ArtifactRegistry | None = None,
) -> ModelServices:
    """Every adapter of the model side, configured by the settings."""
    from nodeau.adapters.fs_store import FilesystemModelStore
    from nodeau.adapters.gguf_inspector import GgufModelInspector
    from nodeau.adapters.sqlite_registry import SqliteRegistry

    def catalog() -> Catalog:
        from nodeau.adapters.catalog_file import JsonCatalogFile, LayeredCatalogFiles

        if s.own_catalog == s.catalog:
            return JsonCatalogFile(s.catalog).load()
        return LayeredCatalogFiles(s.catalog, s.own_catalog).load()

    def own_catalog() -> Catalog:
        from nodeau.adapters.catalog_file import JsonCatalogFile

        own = s.own_catalog
        return JsonCatalogFile(own).load() if own.exists() else Catalog()

    def keep_own_catalog(catalog: Catalog) -> None:
        from nodeau.adapters.catalog_file import JsonCatalogFile

        JsonCatalogFile(s.own_catalog).save(catalog)

    def sha256_of(path: Path) -> Sha256:
        from nodeau.adapters.hashing import hash_file

        return hash_file(path)

    def publisher() -> Publisher:
        from nodeau.adapters.http_publisher import HttpPublisher

        return HttpPublisher.over_the_internet()

    def url_for(entry: CatalogEntry, file: ArtifactFile) -> str:
        from nodeau.adapters.http_publisher import fetch_url

        return fetch_url(entry.entry, file, base_url=s.publisher_url)

    def progress_for(file: ArtifactFile) -> AbstractContextManager[FetchProgress]:
        from nodeau.adapters.progress import fetch_progress

        return fetch_progress(file.path)

    if store is None:
        store = FilesystemModelStore(
            s.models_root, s.machine, reserve_bytes=s.reserve_bytes, clock=utc_now
        )
    return ModelServices(
        settings=s,
        store=store,
        inspector=GgufModelInspector() if inspector is None else inspector,
        registry=SqliteRegistry(s.registry_path) if registry is None else registry,
        catalog=catalog,
        own_catalog=own_catalog,
        keep_own_catalog=keep_own_catalog,
        sha256_of=sha256_of,
        publisher=publisher,
        url_for=url_for,
        progress_for=progress_for,
    )
