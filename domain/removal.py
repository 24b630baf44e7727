"""Deleting this machine's copy of a model (``nodeau models rm``): what goes, what stays, why.

Anything relying on the artifact refuses the whole deletion; a file another artifact
still needs here stays; the registry's record stays (docs/adr/0024-models-rm.md).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable

from attrs import frozen

from nodeau.domain.artifacts import Artifact, ArtifactFile
from nodeau.domain.resolution import SHORT_ID


class RelianceKind(str, enum.Enum):
    """What relies on a copy: the word a person reads, and what to do about it."""

    SERVICE = "service"
    BATCH = "batch"
    COPY_REQUEST = "copy-request"
    RECOVERY = "recovery"


@frozen(kw_only=True)
class Reliance:
    """One thing relying on an artifact's files on this machine."""

    kind: RelianceKind
    artifact_id: str  # SHA-256 hex
    name: str  # the workload, or the machine a copy request is for
    state: str = ""  # the workload's state, or the copy's

    @property
    def sentence(self) -> str:
        """What relies on it, and how to stop it relying."""
        match self.kind:
            case RelianceKind.SERVICE:
                return (
                    f"service {self.name} ({self.state}) uses it; "
                    f"`nodeau stop {self.name} --workload` frees it"
                )
            case RelianceKind.BATCH:
                return (
                    f"batch job {self.name} ({self.state}) uses it; "
                    f"`nodeau batch stop {self.name}` frees it"
                )
            case RelianceKind.COPY_REQUEST:
                return (
                    f"a copy request asks {self.name} to keep it ({self.state}); "
                    f"`nodeau models copy MODEL --to {self.name} --remove` takes it back"
                )
            case RelianceKind.RECOVERY:
                return (
                    f"the recovery of {self.name} counts on this copy; "
                    f"`nodeau recovery set {self.name} never` lets it go"
                )


@frozen(kw_only=True)
class KeptFile:
    """A file of the artifact left in place, and why."""

    path: str
    sha256: str
    size_bytes: int
    why: str


@frozen(kw_only=True)
class Removal:
    """What ``models rm`` deletes (files held here), keeps (with why) and found absent."""

    artifact_id: str
    names: tuple[str, ...]
    delete: tuple[ArtifactFile, ...]
    kept: tuple[KeptFile, ...]
    absent: tuple[ArtifactFile, ...]


@frozen(kw_only=True)
class RemovalRefused:
    """Nothing deleted: what relies on the artifact, and one sentence for a person."""

    artifact_id: str
    names: tuple[str, ...]
    reliances: tuple[Reliance, ...]
    sentence: str


@frozen(kw_only=True)
class KnownArtifact:
    """An artifact this machine knows (registry or catalog) and the names it goes by."""

    artifact: Artifact
    names: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        short = self.artifact.id.hex[:SHORT_ID]
        return f"{', '.join(self.names)} ({short})" if self.names else short


def plan_removal(
    target: KnownArtifact,
    *,
    known: Iterable[KnownArtifact],
    held: Collection[str],
    reliances: Iterable[Reliance],
) -> Removal | RemovalRefused:
    """Delete ``target``'s files held here (``held``: SHA-256 hex of every file the cache
    has, in any state), unless something relies on it; keep a file another known artifact
    still needs here."""
    relied = tuple(reliances)
    own = tuple(r for r in relied if r.artifact_id == target.artifact.id.hex)
    if own:
        return RemovalRefused(
            artifact_id=target.artifact.id.hex,
            names=target.names,
            reliances=own,
            sentence=f"{target.words}: nothing deleted: " + "; ".join(r.sentence for r in own),
        )
    others = [k for k in known if k.artifact.id != target.artifact.id]
    delete: list[ArtifactFile] = []
    kept: list[KeptFile] = []
    absent: list[ArtifactFile] = []
    for f in target.artifact.files:
        if f.sha256.hex not in held:
            absent.append(f)
            continue
        why = _still_needed(f, others, held, relied)
        if why is None:
            delete.append(f)
        else:
            kept.append(
                KeptFile(path=f.path, sha256=f.sha256.hex, size_bytes=f.size_bytes, why=why)
            )
    return Removal(
        artifact_id=target.artifact.id.hex,
        names=target.names,
        delete=tuple(delete),
        kept=tuple(kept),
        absent=tuple(absent),
    )


def _still_needed(
    file: ArtifactFile,
    others: Iterable[KnownArtifact],
    held: Collection[str],
    relied: tuple[Reliance, ...],
) -> str | None:
    """Why another artifact still needs ``file`` here; None when none does."""
    for other in others:
        if all(f.sha256 != file.sha256 for f in other.artifact.files):
            continue
        leaning = [r for r in relied if r.artifact_id == other.artifact.id.hex]
        if leaning:
            return f"also a file of {other.words}, which " + "; ".join(r.sentence for r in leaning)
        if all(f.sha256.hex in held for f in other.artifact.files):
            return f"also a file of {other.words}, held here whole"
    return None
