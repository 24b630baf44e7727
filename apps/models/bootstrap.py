"""The model side's composition: its adapters built from the settings, for the roots of the
CLI, the agent and the dashboard; a test passes its own store, inspector or registry. A
command that reads no model never imports this module (``nodeau ps`` does not)."""

from __future__ import annotations

from contextlib import AbstractContextManager

from nodeau.adapters.catalog_file import JsonCatalogFile, LayeredCatalogFiles
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.hashing import hash_file
from nodeau.adapters.http_publisher import HttpPublisher, fetch_url
from nodeau.adapters.progress import fetch_progress
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.models.services import ModelServices
from nodeau.apps.settings import Settings, utc_now
from nodeau.domain.artifacts import ArtifactFile
from nodeau.domain.catalog import Catalog, CatalogEntry
from nodeau.ports.models import FetchProgress, ModelInspector, ModelStore
from nodeau.ports.registry import ArtifactRegistry


def build(
    s: Settings,
    *,
    store: ModelStore | None = None,
    inspector: ModelInspector | None = None,
    registry: ArtifactRegistry | None = None,
) -> ModelServices:
    """Every adapter of the model side, configured by the settings."""

    def catalog() -> Catalog:
        if s.own_catalog == s.catalog:
            return JsonCatalogFile(s.catalog).load()
        return LayeredCatalogFiles(s.catalog, s.own_catalog).load()

    def own_catalog() -> Catalog:
        own = s.own_catalog
        return JsonCatalogFile(own).load() if own.exists() else Catalog()

    def keep_own_catalog(catalog: Catalog) -> None:
        JsonCatalogFile(s.own_catalog).save(catalog)

    def url_for(entry: CatalogEntry, file: ArtifactFile) -> str:
        return fetch_url(entry.entry, file, base_url=s.publisher_url)

    def progress_for(file: ArtifactFile) -> AbstractContextManager[FetchProgress]:
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
        sha256_of=hash_file,
        publisher=HttpPublisher.over_the_internet,
        url_for=url_for,
        progress_for=progress_for,
    )
