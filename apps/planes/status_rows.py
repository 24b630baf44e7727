"""The rows of ``nodeau model status``: downloaded and verified as separate columns, for
this machine's cache, or for every machine of a fleet as its agent reports it."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from nodeau.domain.aliases import AliasBook
from nodeau.domain.cache import CachedFile, CopyState
from nodeau.domain.catalog import Catalog
from nodeau.domain.copies import CopyPhase, CopyProgress
from nodeau.domain.fleet_reports import MachineReport


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


def fleet_status_rows(reports: Iterable[MachineReport]) -> tuple[StatusRow, ...]:
    """What every machine of a fleet holds, as its agent last reported it: each verified
    artifact (verified when reported), and each copy its agent is fetching, verifying or
    failed to make."""
    rows: list[StatusRow] = []
    for report in sorted(reports, key=lambda r: r.machine):
        verified = {a.id for a in report.artifacts}
        names = {a.id: a.names for a in report.artifacts}
        for a in sorted(report.artifacts, key=lambda a: a.id):
            rows.append(
                StatusRow(
                    machine=report.machine,
                    names=tuple(sorted(a.names)),
                    sha256=a.id,
                    size_bytes=a.size_bytes,
                    bytes_present=a.size_bytes,
                    downloaded="yes",
                    verified=f"yes (reported {report.at:%Y-%m-%d %H:%M} UTC)",
                    state=CopyState.VERIFIED,
                )
            )
        for c in sorted(report.copies, key=lambda c: c.artifact):
            row = _copy_row(report.machine, c, names.get(c.artifact, ()))
            if c.artifact not in verified and row is not None:
                rows.append(row)
    return tuple(rows)


def _copy_row(machine: str, c: CopyProgress, names: tuple[str, ...]) -> StatusRow | None:
    """A copy under way on ``machine`` as a status row (None: no bytes to speak of yet)."""
    if c.phase not in (CopyPhase.FETCHING, CopyPhase.VERIFYING, CopyPhase.FAILED):
        return None
    total = max(c.bytes_total, 1)
    whole = c.bytes_done >= c.bytes_total > 0
    if whole:
        downloaded = "yes"
    elif c.bytes_done:
        downloaded = f"partial ({100 * c.bytes_done // total}%)"
    else:
        downloaded = "no"
    verified = {
        CopyPhase.VERIFYING: "no (verifying now)",
        CopyPhase.FAILED: f"no (failed: {c.reason})" if c.reason else "no (failed)",
    }.get(c.phase, "no")
    return StatusRow(
        machine=machine,
        names=tuple(sorted(names)),
        sha256=c.artifact,
        size_bytes=total,
        bytes_present=c.bytes_done,
        downloaded=downloaded,
        verified=verified,
        state=CopyState.DOWNLOADED if whole else CopyState.PARTIAL,
    )
