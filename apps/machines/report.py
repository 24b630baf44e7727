"""A machine's report, built from its ports: the cards it has and the models it holds verified.

Why it is so: docs/adr/decisions/apps.md (machines/report.py).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import datetime
from pathlib import Path

from attrs import frozen

from nodeau.apps.models.actions import model_names
from nodeau.domain.aliases import AliasBook
from nodeau.domain.artifacts import Artifact
from nodeau.domain.catalog import Catalog
from nodeau.domain.fleet_reports import MachineArtifact, MachineReport
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.hardware import GpuInventory
from nodeau.ports.models import ModelError, ModelInspector, ModelStore


@frozen(kw_only=True)
class HeldArtifact:
    """An artifact whose every file is verified here, and the path of its first file."""

    id: str
    names: tuple[str, ...]
    size_bytes: int
    path: Path


@frozen(kw_only=True)
class BuiltReport:
    """The report to publish, and one line for each model left out of it."""

    report: MachineReport
    problems: tuple[str, ...]


def held_artifacts(
    store: ModelStore, book: AliasBook, catalog: Catalog
) -> tuple[HeldArtifact, ...]:
    """Every artifact verified on this machine, by id; known ones carry their names."""
    known: dict[str, Artifact] = {
        e.entry.artifact().id.hex: e.entry.artifact() for e in catalog.entries
    }
    known.update({i.hex: a for i, a in book.artifacts.items()})
    held: list[HeldArtifact] = []
    for artifact in known.values():
        paths = [store.verified_path(f.sha256) for f in artifact.files]
        first = paths[0]
        if first is None or any(p is None for p in paths):
            continue
        held.append(
            HeldArtifact(
                id=artifact.id.hex,
                names=model_names(artifact, book, catalog),
                size_bytes=artifact.size_bytes,
                path=first,
            )
        )
    listed = {f.sha256 for a in known.values() for f in a.files}
    for f in store.files():
        path = store.verified_path(f.sha256) if f.sha256 not in listed else None
        if path is not None:
            held.append(HeldArtifact(id=f.sha256.hex, names=(), size_bytes=f.size_bytes, path=path))
    return tuple(sorted(held, key=lambda h: h.id))


def build_report(
    *,
    inventory: GpuInventory,
    store: ModelStore,
    book: AliasBook,
    catalog: Catalog,
    inspector: ModelInspector,
    now: datetime,
    summaries: MutableMapping[str, ModelSummary] | None = None,
) -> BuiltReport:
    """This machine's report at ``now``: its cards as read now and its verified artifacts."""
    cache: MutableMapping[str, ModelSummary] = {} if summaries is None else summaries
    reading = inventory.read()
    artifacts: list[MachineArtifact] = []
    problems: list[str] = []
    for held in held_artifacts(store, book, catalog):
        summary = cache.get(held.id)
        if summary is None:
            try:
                summary = inspector.inspect(held.path)
            except ModelError as exc:
                problems.append(f"model {held.id[:12]} left out of the report: {_flat(exc)}")
                continue
            cache[held.id] = summary
        artifacts.append(
            MachineArtifact(
                id=held.id,
                names=held.names,
                size_bytes=held.size_bytes,
                path=str(held.path),
                summary=summary,
            )
        )
    return BuiltReport(
        report=MachineReport(reading=reading, at=now, artifacts=tuple(artifacts)),
        problems=tuple(problems),
    )


def _flat(exc: BaseException) -> str:
    return " ".join(str(exc).split())
