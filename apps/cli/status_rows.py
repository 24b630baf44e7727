"""The rows of ``nodeau model status``: downloaded and verified as separate columns."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from nodeau.domain.aliases import AliasBook
from nodeau.domain.cache import CachedFile, CopyState
from nodeau.domain.catalog import Catalog


@frozen(kw_only=True)
class StatusRow:
    machine: str
    names: tuple[str, ...]
    sha256: str
    size_bytes: int
    bytes_present: int
    downloaded: str
    verified: str
    state: CopyState


def names_of_file(sha256: str, book: AliasBook, catalog: Catalog) -> tuple[str, ...]:
    """Aliases whose current artifact holds this file, and catalog names that list it."""
    names = {
        alias
        for alias in book.aliases
        if (current := book.resolve(alias)) is not None
        and (artifact := book.artifact(current)) is not None
        and any(f.sha256.hex == sha256 for f in artifact.files)
    }
    names |= {e.name for e in catalog.entries if any(f.sha256.hex == sha256 for f in e.entry.files)}
    return tuple(sorted(names))


def downloaded_column(f: CachedFile) -> str:
    if f.downloaded:
        return "yes"
    if f.bytes_present == 0:
        return "no"
    return f"partial ({100 * f.bytes_present // f.size_bytes}%)"


def verified_column(f: CachedFile) -> str:
    if f.verified and f.verified_at is not None:
        return f"yes ({f.verified_at:%Y-%m-%d %H:%M} UTC)"
    if f.state is CopyState.MISMATCH:
        return "NO: wrong bytes"
    return "no"


def status_rows(
    files: Iterable[CachedFile], book: AliasBook, catalog: Catalog, machine: str
) -> tuple[StatusRow, ...]:
    """One row per file this machine holds or is fetching."""
    return tuple(
        StatusRow(
            machine=machine,
            names=names_of_file(f.sha256.hex, book, catalog),
            sha256=f.sha256.hex,
            size_bytes=f.size_bytes,
            bytes_present=f.bytes_present,
            downloaded=downloaded_column(f),
            verified=verified_column(f),
            state=f.state,
        )
        for f in sorted(files, key=lambda f: f.sha256.hex)
    )
