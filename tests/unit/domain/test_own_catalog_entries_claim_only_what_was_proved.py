"""A person's own catalog entry (domain/catalog.py ``own_entry``, ``with_entry``): it claims
exactly what qualification proved on its bytes, no task proved is a refusal, and a name or
bytes listed already cannot be listed again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.domain.catalog import ArchitectureSummary, Catalog, CatalogEntry, own_entry, with_entry
from nodeau.domain.qualification import Capability, capability_of
from nodeau.domain.tasks import Task

REVISION = "0123456789abcdef0123456789abcdef01234567"
SUMMARY = ArchitectureSummary(
    architecture="llama", parameters="1M", context_length=256, quantisation="F32"
)


def curated(name: str, content: bytes) -> CuratedEntry:
    file = ArtifactFile(
        path=f"{name}.gguf", size_bytes=len(content), sha256=Sha256.of_bytes(content)
    )
    return CuratedEntry(name=name, publisher="me", repo="me/x", revision=REVISION, files=(file,))


@given(st.frozensets(st.sampled_from(list(Capability))))
def test_an_entry_claims_exactly_the_capabilities_proved(proved: frozenset[Capability]) -> None:
    made = own_entry(curated("mine", b"a"), SUMMARY, proved)
    tasks = {t for t in Task if capability_of(t) in proved}
    if not tasks:
        assert isinstance(made, str) and "proved no task here" in made
        return
    assert isinstance(made, CatalogEntry)
    assert set(made.tasks) == tasks and set(made.capabilities) == proved


def test_a_name_or_bytes_listed_already_cannot_be_listed_again() -> None:
    first = own_entry(curated("mine", b"a"), SUMMARY, frozenset({Capability.CHAT}))
    assert isinstance(first, CatalogEntry)
    catalog = with_entry(Catalog(), first)
    assert isinstance(catalog, Catalog) and catalog.entries == (first,)
    same_name = own_entry(curated("mine", b"b"), SUMMARY, frozenset({Capability.CHAT}))
    same_bytes = own_entry(curated("other", b"a"), SUMMARY, frozenset({Capability.EMBED}))
    assert isinstance(same_name, CatalogEntry) and isinstance(same_bytes, CatalogEntry)
    assert "mine is in the catalog already (me/me/x@" in str(with_entry(catalog, same_name))
    assert with_entry(catalog, same_bytes) == "those bytes are in the catalog already, as mine"


def test_an_entry_keeps_its_summary_and_an_entry_proving_nothing_says_what_to_do() -> None:
    entry = curated("mine", b"a")
    assert own_entry(entry, SUMMARY, frozenset({Capability.CHAT})) == CatalogEntry(
        entry=entry, summary=SUMMARY, tasks=(Task.CHAT,), capabilities=(Capability.CHAT,)
    )
    assert own_entry(entry, SUMMARY, frozenset()) == (
        "mine: its bytes have proved no task here, and an entry claims only what was proved: "
        "import the file, then nodeau model qualify it, and add it again"
    )
