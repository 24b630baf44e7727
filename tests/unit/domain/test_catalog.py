"""The curated catalog: unique names, tasks, and a lookup that says what is close."""

from __future__ import annotations

import pytest
from attrs import evolve

from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import (
    ArchitectureSummary,
    Catalog,
    CatalogEntry,
    catalog_claims,
    find_entry,
)
from nodeau.domain.qualification import Capability
from nodeau.domain.tasks import Task

REVISION = "0123456789abcdef0123456789abcdef01234567"


def entry(name: str, tasks: tuple[Task, ...] = (Task.CHAT,)) -> CatalogEntry:
    file = ArtifactFile(path="m.gguf", size_bytes=3, sha256=Sha256.of_bytes(name.encode()))
    return CatalogEntry(
        entry=CuratedEntry(
            name=name, publisher="p", repo=f"p/{name}", revision=REVISION, files=(file,)
        ),
        summary=ArchitectureSummary(
            architecture="llama", parameters="8B", context_length=8192, quantisation="Q4_K_M"
        ),
        tasks=tasks,
    )


CATALOG = Catalog(entries=(entry("qwen3-8b-q4"), entry("qwen3-4b-q4"), entry("llama-3-8b")))


def test_find_entry_by_exact_name() -> None:
    found = find_entry(CATALOG, "llama-3-8b").unwrap()
    assert found.name == "llama-3-8b"
    assert found.entry.repo == "p/llama-3-8b"


@pytest.mark.parametrize(
    ("typed", "sentence"),
    [
        ("qwen", "no model called 'qwen' in the catalog; did you mean qwen3-4b-q4, qwen3-8b-q4?"),
        ("QWEN3-8B", "no model called 'QWEN3-8B' in the catalog; did you mean qwen3-8b-q4?"),
        ("mistral", "no model called 'mistral' in the catalog"),
    ],
)
def test_an_unknown_name_says_what_is_close(typed: str, sentence: str) -> None:
    assert find_entry(CATALOG, typed).failure() == sentence


def test_an_empty_catalog_is_honest() -> None:
    assert (
        find_entry(Catalog(), "anything").failure() == "no model called 'anything' in the catalog"
    )


def test_a_catalog_names_each_model_once() -> None:
    with pytest.raises(ValueError, match=r"^catalog names a, b more than once$"):
        Catalog(entries=(entry("a"), entry("b"), entry("a"), entry("b"), entry("c")))


def test_an_entry_serves_at_least_one_task() -> None:
    with pytest.raises(ValueError, match=r"^catalog entry x serves no task$"):
        entry("x", tasks=())


def test_the_catalog_claims_for_the_bytes_it_lists_what_their_entry_claims() -> None:
    checked = evolve(entry("qwen"), capabilities=(Capability.CHAT, Capability.TOOLS))
    tasks_only = entry("embedder", (Task.EMBED,))
    catalog = Catalog(entries=(checked, tasks_only))
    assert catalog_claims(catalog, checked.entry.artifact().id.hex) == {
        Capability.CHAT,
        Capability.TOOLS,
    }
    # an entry that lists no checked capability claims what its tasks need
    assert catalog_claims(catalog, tasks_only.entry.artifact().id.hex) == {Capability.EMBED}
    assert catalog_claims(catalog, "0" * 64) is None
