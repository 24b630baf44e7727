"""The curated catalog: models Nodeau fetches from their publishers, pinned.

Why it is so: docs/adr/decisions/domain.md (catalog.py).
"""

from __future__ import annotations

from attrs import frozen
from returns.result import Failure, Result, Success

from nodeau.domain.artifacts import CuratedEntry
from nodeau.domain.qualification import Capability, capability_of
from nodeau.domain.resolution import did_you_mean
from nodeau.domain.tasks import Task


@frozen(kw_only=True)
class ArchitectureSummary:
    """What the catalog says of a model before its file is read."""

    architecture: str
    parameters: str
    context_length: int
    quantisation: str


@frozen(kw_only=True)
class CatalogEntry:
    """One curated model: its pinned files, a summary, the tasks it serves and the
    capabilities we checked it has (a model claims only what was checked)."""

    entry: CuratedEntry
    summary: ArchitectureSummary
    tasks: tuple[Task, ...]
    capabilities: tuple[Capability, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.tasks:
            raise ValueError(f"catalog entry {self.entry.name} serves no task")

    @property
    def name(self) -> str:
        return self.entry.name


@frozen(kw_only=True)
class Catalog:
    """Every curated entry, each under a unique name."""

    entries: tuple[CatalogEntry, ...] = ()

    def __attrs_post_init__(self) -> None:
        names = [e.name for e in self.entries]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"catalog names {', '.join(duplicated)} more than once")


def find_entry(catalog: Catalog, name: str) -> Result[CatalogEntry, str]:
    """The entry called ``name``, or a sentence naming the close matches."""
    for entry in catalog.entries:
        if entry.name == name:
            return Success(entry)
    hint = did_you_mean(name, (e.name for e in catalog.entries))
    return Failure(f"no model called {name!r} in the catalog{hint}")


def catalog_claims(catalog: Catalog, artifact_id: str) -> frozenset[Capability] | None:
    """What the catalog claims for these bytes: the capabilities of the entry that lists
    them (its checked capabilities, else those its tasks need); None when no entry does."""
    for e in catalog.entries:
        if e.entry.artifact().id.hex == artifact_id:
            return frozenset(e.capabilities or (capability_of(t) for t in e.tasks))
    return None


def own_entry(
    entry: CuratedEntry, summary: ArchitectureSummary, proved: frozenset[Capability]
) -> CatalogEntry | str:
    """A person's own catalog entry for ``entry``'s files: it claims what qualification
    ``proved`` on those bytes (its tasks, and each capability), nothing more; a sentence
    instead when no task was proved, since an entry must serve one."""
    tasks = tuple(t for t in Task if capability_of(t) in proved)
    if not tasks:
        return (
            f"{entry.name}: its bytes have proved no task here, and an entry claims only what "
            "was proved: import the file, then nodeau model qualify it, and add it again"
        )
    claimed = tuple(c for c in Capability if c in proved)
    return CatalogEntry(entry=entry, summary=summary, tasks=tasks, capabilities=claimed)


def listing_problem(catalog: Catalog, entry: CuratedEntry) -> str | None:
    """Why ``entry`` cannot join ``catalog``: its name is taken, or its bytes are listed
    already (one name per artifact: a second would be an alias); None when it can."""
    for e in catalog.entries:
        if e.name == entry.name:
            return f"{entry.name} is in the catalog already ({e.entry.source}); choose another name"
        if e.entry.artifact().id == entry.artifact().id:
            return f"those bytes are in the catalog already, as {e.name}"
    return None


def with_entry(catalog: Catalog, entry: CatalogEntry) -> Catalog | str:
    """``catalog`` with ``entry`` added; the ``listing_problem`` sentence instead."""
    problem = listing_problem(catalog, entry.entry)
    return problem if problem is not None else Catalog(entries=(*catalog.entries, entry))
