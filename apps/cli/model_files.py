"""``nodeau models list`` and ``nodeau models rm``: this machine's copies, and deleting one.

Why it is so: docs/adr/decisions/apps-cli.md (model_files.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from attrs import asdict, frozen

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import size, table, to_json
from nodeau.apps.models.actions import resolve_model
from nodeau.apps.models.removal import remove_model, workload_reliances
from nodeau.apps.planes.status_rows import StatusRow, status_rows
from nodeau.domain.artifacts import Sha256
from nodeau.domain.copies import PERSON, RECOVERY_PREFIX
from nodeau.domain.removal import Reliance, RelianceKind, RemovalRefused

if TYPE_CHECKING:
    from nodeau.apps.models.actions import Resolved
    from nodeau.apps.models.removal import RemovalReport
    from nodeau.apps.planes.plane import Plane


@frozen(kw_only=True)
class ListRow(StatusRow):
    """A row of ``model status`` and where this machine keeps the file (None: no verified
    copy to point at)."""

    path: str | None


def list_(*, json: bool = False) -> int:
    """Every model file this machine holds: name, size, downloaded, verified, and where.

    Parameters
    ----------
    json
        Print the rows as JSON.
    """

    s = bootstrap.model_services()
    rows = [
        ListRow(
            **asdict(r, recurse=False),
            path=None if (p := s.store.verified_path(Sha256(hex=r.sha256))) is None else str(p),
        )
        for r in status_rows(s.store.files(), s.registry.book(), s.catalog(), s.settings.machine)
    ]
    if json:
        print(to_json(rows))
        return 0
    headers = ("MODEL", "ARTIFACT", "SIZE", "DOWNLOADED", "VERIFIED", "PATH")
    cells = [
        (
            ", ".join(r.names) or "-",
            r.sha256[:12],
            size(r.size_bytes),
            r.downloaded,
            r.verified,
            r.path or "-",
        )
        for r in rows
    ]
    print(table(headers, cells) if rows else "this machine holds no model files")
    return 0


def rm(model: str, /, *, json: bool = False) -> int:
    """Delete this machine's copy of a model's files, unless something relies on them.

    A workload using it (any state but succeeded, failed or stopped; batch jobs too), a
    copy request for it on this machine or a recovery counting on that copy refuses the
    deletion, naming each; nothing is deleted then. A file another model held here needs
    stays. The registry keeps the artifact's record, aliases and qualification evidence:
    importing or pulling the same bytes again brings it back whole.

    Parameters
    ----------
    model
        An alias, a catalog name or an artifact id (or a prefix of six or more digits).
    json
        Print what was deleted and kept (or the refusal) as JSON.
    """

    s = bootstrap.model_services()
    book, catalog = s.registry.book(), s.catalog()
    resolved = resolve_model(model, book, catalog, s.store.files())
    done = remove_model(
        resolved,
        store=s.store,
        book=book,
        catalog=catalog,
        reliances=_reliances(resolved),
        on_wait=lambda sentence: print(sentence, file=sys.stderr, flush=True),
    )
    if isinstance(done, RemovalRefused):
        if json:
            print(to_json(done))
        print(f"nodeau: {done.sentence}", file=sys.stderr)
        return 1
    print(to_json(done) if json else "\n".join(_removal_lines(resolved, done)))
    return 0


def _removal_lines(resolved: Resolved, report: RemovalReport) -> list[str]:
    name, removal = resolved.display_name, report.removal
    lines = [
        f"{name}: deleted {f.path} ({f.sha256.short}, {size(f.size_bytes)})" for f in removal.delete
    ]
    lines += [f"{name}: kept {k.path} ({k.sha256[:12]}): {k.why}" for k in removal.kept]
    if not removal.delete and not removal.kept:
        lines.append(f"{name}: this machine holds no copy of it; nothing deleted")
        return lines
    lines.append(
        f"{name}: {size(report.freed_bytes)} freed; the registry keeps its record, names and "
        "evidence (`nodeau models import FILE` or `nodeau models pull NAME` brings it back)"
    )
    return lines


def _reliances(resolved: Resolved) -> tuple[Reliance, ...]:
    """What relies on a model's files on this machine, as the plane in force knows it."""

    s = bootstrap.settings()
    if not bootstrap.plane_choice().kubernetes:
        return workload_reliances(bootstrap.LazyMachineParts(s).state.snapshot().workloads)
    return _fleet_reliances(resolved, bootstrap.plane(), s.machine)


def _fleet_reliances(resolved: Resolved, fleet: Plane, machine: str) -> tuple[Reliance, ...]:
    """On a fleet: the copy requests and recoveries for this machine's copy, and the
    workloads placed on this machine that serve the model by one of its names."""

    artifact = resolved.artifact.id.hex
    found: list[Reliance] = []
    for copy in fleet.copies.listing().copies:
        if copy.machine != machine or copy.artifact != artifact:
            continue
        for asker in copy.asked_by:
            if asker == PERSON:
                found.append(
                    Reliance(
                        kind=RelianceKind.COPY_REQUEST,
                        artifact_id=artifact,
                        name=machine,
                        state=copy.state,
                    )
                )
            elif asker.startswith(RECOVERY_PREFIX):
                found.append(
                    Reliance(
                        kind=RelianceKind.RECOVERY,
                        artifact_id=artifact,
                        name=asker.removeprefix(RECOVERY_PREFIX),
                    )
                )
    names = {*resolved.names, artifact[:12]}
    found += [
        Reliance(
            kind=RelianceKind.BATCH if w.kind == "batch" else RelianceKind.SERVICE,
            artifact_id=artifact,
            name=w.name,
            state=w.state,
        )
        for w in fleet.serving.workloads()
        if w.machine == machine and w.model in names
    ]
    return tuple(found)
