"""Catalog models for the copy tests: small files served by the local publisher, with faults.

Each model is one or more files of a few hundred KiB to a few MiB of deterministic bytes,
listed in a catalog with their real SHA-256s, and served at the path ``fetch_url``
builds for them, so an agent fetches them as it would from Hugging Face.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from attrs import frozen

from nodeau.adapters.catalog_file import catalog_json
from nodeau.adapters.http_publisher import fetch_url
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry
from nodeau.domain.tasks import Task
from tests.support.real.publisher import LocalPublisher

KIB = 1024
MIB = 1024 * KIB
REVISION = "0123456789abcdef0123456789abcdef01234567"


def some_bytes(size: int, seed: int) -> bytes:
    """``size`` bytes that depend on ``seed`` only."""
    return random.Random(seed).randbytes(size)


@frozen(kw_only=True)
class Model:
    """A catalog model and the bytes of its files, by path."""

    entry: CatalogEntry
    data: dict[str, bytes]

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def artifact(self) -> str:
        """The artifact id (hex), as requests and reports name it."""
        return self.entry.entry.artifact().id.hex

    @property
    def size(self) -> int:
        return sum(len(d) for d in self.data.values())

    def file(self, path: str) -> ArtifactFile:
        return next(f for f in self.entry.entry.files if f.path == path)

    def path(self, file: str) -> str:
        """Where the publisher serves the file (the URL's path)."""
        url = fetch_url(self.entry.entry, self.file(file), base_url="http://x")
        return url.removeprefix("http://x")

    def serve(self, publisher: LocalPublisher, **faults: Any) -> None:
        """Serve every file with these faults (see ``tests.support.real.publisher.Faults``)."""
        for file, data in self.data.items():
            publisher.serve(self.path(file), data, **faults)


def model(name: str, *files: tuple[str, int], seed: int = 0) -> Model:
    """A catalog model of these (path, size) files of random bytes (not a GGUF a report can
    describe: for tests with an inspector of their own)."""
    return model_of(
        name, {path: some_bytes(size, seed + i) for i, (path, size) in enumerate(files)}
    )


def gguf_model(name: str, *, seed: int, extra: int = 0) -> Model:
    """A catalog model whose first file is a tiny llama GGUF (about 0.5 MiB) the agent's
    inspector reads, and, with ``extra``, a second file of that many bytes."""
    from tests.support.builders.tiny_gguf import tiny_llama_bytes

    files = {"model.gguf": tiny_llama_bytes(seed=seed, name=name)}
    if extra:
        files["tokenizer.json"] = some_bytes(extra, seed)
    return model_of(name, files)


def model_of(name: str, data: dict[str, bytes]) -> Model:
    """A catalog model of these files."""
    listed = tuple(
        ArtifactFile(path=p, size_bytes=len(d), sha256=Sha256(hex=hashlib.sha256(d).hexdigest()))
        for p, d in data.items()
    )
    entry = CuratedEntry(
        name=name, publisher="tests", repo=f"tests/{name}", revision=REVISION, files=listed
    )
    summary = ArchitectureSummary(
        architecture="llama", parameters="tiny", context_length=256, quantisation="F32"
    )
    return Model(entry=CatalogEntry(entry=entry, summary=summary, tasks=(Task.CHAT,)), data=data)


def catalog_of(*models: Model) -> Catalog:
    return Catalog(entries=tuple(m.entry for m in models))


def write_catalog(path: Path, *models: Model) -> Path:
    """The catalog document of these models, as NODEAU_CATALOG reads it."""
    path.write_text(catalog_json(catalog_of(*models)), encoding="utf-8")
    return path
