"""Aliases: the name a user types to run an imported model, and what it never does.

Why it is so: docs/adr/decisions/domain.md (aliases.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from types import MappingProxyType

from attrs import field, frozen
from returns.result import Failure, Result, Success

from nodeau.domain.artifacts import Artifact, ArtifactId, is_sha256_hex

ALIAS_MAX_LENGTH = 128
_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def alias_problem(text: str) -> str | None:
    """Why ``text`` cannot be an alias, as a sentence for a person, or None if it can."""
    if not text:
        return "an alias cannot be empty"
    if len(text) > ALIAS_MAX_LENGTH:
        return f"an alias has at most {ALIAS_MAX_LENGTH} characters; {text[:20]!r}… has {len(text)}"
    if any(c.isspace() for c in text):
        return f"an alias cannot contain spaces or other blanks: {text!r}"
    if _ALIAS.fullmatch(text) is None:
        return (
            f"an alias starts with a letter or digit and uses only letters, digits"
            f" and . _ : - : {text!r} does not"
        )
    if is_sha256_hex(text.lower()):
        return f"an alias cannot look like an artifact id (64 hex digits): {text!r}"
    return None


def parse_alias(text: str) -> Result[str, str]:
    """An alias from user input, or the sentence saying why it is not one."""
    problem = alias_problem(text)
    return Success(text) if problem is None else Failure(problem)


def _histories(
    value: Mapping[str, tuple[ArtifactId, ...]],
) -> Mapping[str, tuple[ArtifactId, ...]]:
    return MappingProxyType({name: tuple(ids) for name, ids in value.items()})


def _artifacts(value: Mapping[ArtifactId, Artifact]) -> Mapping[ArtifactId, Artifact]:
    return MappingProxyType(dict(value))


@frozen(kw_only=True)
class AliasBook:
    """Every artifact recorded, by id, and each alias's append-only history of artifact ids."""

    histories: Mapping[str, tuple[ArtifactId, ...]] = field(factory=dict, converter=_histories)
    artifacts: Mapping[ArtifactId, Artifact] = field(factory=dict, converter=_artifacts)

    def __attrs_post_init__(self) -> None:
        for artifact_id, artifact in self.artifacts.items():
            if artifact.id != artifact_id:
                raise ValueError(f"artifact {artifact.id.hex} is filed under {artifact_id.hex}")
        for name, ids in self.histories.items():
            problem = alias_problem(name)
            if problem is not None:
                raise ValueError(problem)
            if not ids:
                raise ValueError(f"alias {name} has an empty history")
            unknown = [i.hex for i in ids if i not in self.artifacts]
            if unknown:
                raise ValueError(f"alias {name} names artifacts never recorded: {unknown}")

    @classmethod
    def empty(cls) -> AliasBook:
        """A book with no artifact and no alias."""
        return cls()

    def resolve(self, alias: str) -> ArtifactId | None:
        """The artifact the alias names now (its newest entry), or None for an unused alias."""
        ids = self.histories.get(alias, ())
        return ids[-1] if ids else None

    def history(self, alias: str) -> tuple[ArtifactId, ...]:
        """Every artifact the alias has named, oldest first (empty for an unused alias)."""
        return self.histories.get(alias, ())

    def artifact(self, artifact_id: ArtifactId) -> Artifact | None:
        """The recorded artifact with this id, whichever alias named it, if any."""
        return self.artifacts.get(artifact_id)

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every alias ever used, sorted."""
        return tuple(sorted(self.histories))


class ImportKind(enum.StrEnum):
    """What an import did to the book."""

    NEW_ALIAS = "new-alias"
    SAME_ARTIFACT = "same-artifact"
    NEW_ARTIFACT_UNDER_USED_ALIAS = "new-artifact-under-used-alias"
    # the bytes were recorded before (another alias, the catalog, an earlier entry of this alias)
    KNOWN_ARTIFACT_UNDER_USED_ALIAS = "known-artifact-under-used-alias"
    UNREGISTERED = "unregistered"


@frozen(kw_only=True)
class ImportOutcome:
    """What an import did, and one sentence for a person saying so."""

    kind: ImportKind
    alias: str | None
    artifact_id: ArtifactId
    previous: ArtifactId | None
    created: bool
    sentence: str


def record_artifact(book: AliasBook, artifact: Artifact) -> tuple[AliasBook, bool]:
    """The book with this artifact recorded, and whether it was new.

    An id already recorded keeps its first record: a record is never modified.
    """
    if artifact.id in book.artifacts:
        return book, False
    artifacts = {**book.artifacts, artifact.id: artifact}
    return AliasBook(histories=book.histories, artifacts=artifacts), True


def import_under_alias(
    book: AliasBook, alias: str | None, artifact: Artifact
) -> tuple[AliasBook, ImportOutcome]:
    """Record an imported artifact and, unless ``alias`` is None, let the alias name it.

    The alias must already be valid (see :func:`parse_alias`). Importing the
    bytes the alias names now changes nothing. Importing other bytes appends
    to the alias's history and says so; no earlier artifact is touched.
    """
    if alias is not None and (problem := alias_problem(alias)) is not None:
        raise ValueError(problem)
    recorded, created = record_artifact(book, artifact)
    new_id = artifact.id
    if alias is None:
        return recorded, _outcome(ImportKind.UNREGISTERED, None, new_id, None, created)
    previous = book.resolve(alias)
    if previous == new_id:
        return book, _outcome(ImportKind.SAME_ARTIFACT, alias, new_id, previous, created=False)
    histories = {**recorded.histories, alias: (*recorded.history(alias), new_id)}
    after = AliasBook(histories=histories, artifacts=recorded.artifacts)
    if previous is None:
        kind = ImportKind.NEW_ALIAS
    elif created:
        kind = ImportKind.NEW_ARTIFACT_UNDER_USED_ALIAS
    else:
        kind = ImportKind.KNOWN_ARTIFACT_UNDER_USED_ALIAS
    return after, _outcome(kind, alias, new_id, previous, created)


def _outcome(
    kind: ImportKind,
    alias: str | None,
    artifact_id: ArtifactId,
    previous: ArtifactId | None,
    created: bool,
) -> ImportOutcome:
    return ImportOutcome(
        kind=kind,
        alias=alias,
        artifact_id=artifact_id,
        previous=previous,
        created=created,
        sentence=import_sentence(kind, alias, artifact_id, previous, created),
    )


def import_sentence(
    kind: ImportKind,
    alias: str | None,
    artifact_id: ArtifactId,
    previous: ArtifactId | None,
    created: bool,
) -> str:
    """The sentence a person reads after an import."""
    new = artifact_id.short
    before = previous.short if previous is not None else "none"
    recorded = "Recorded new artifact" if created else "Artifact"
    already = "" if created else " (already recorded)"
    untouched = (
        f"Artifact {before} is untouched and still reachable by its id; its qualification"
        f" evidence does not carry over to {new}."
    )
    if kind is ImportKind.UNREGISTERED:
        return f"{recorded} {new}{already}, under no alias."
    if kind is ImportKind.SAME_ARTIFACT:
        return f"Alias '{alias}' already names artifact {new}: the same bytes, nothing changed."
    if kind is ImportKind.NEW_ALIAS:
        return f"{recorded} {new}{already}; alias '{alias}' now names it."
    if kind is ImportKind.NEW_ARTIFACT_UNDER_USED_ALIAS:
        return (
            f"Created a NEW artifact {new} under alias '{alias}', which named artifact"
            f" {before} until now. {untouched}"
        )
    return (
        f"Alias '{alias}' now names artifact {new} (already recorded, different bytes) instead"
        f" of artifact {before}. {untouched}"
    )


def append_only_problem(before: AliasBook, after: AliasBook) -> str | None:
    """Why ``after`` is not ``before`` plus additions, or None when it is.

    Artifact records are never changed or removed, and an alias's history only
    grows at its end: this is what keeps an alias from ever repointing.
    """
    for artifact_id, artifact in before.artifacts.items():
        if after.artifacts.get(artifact_id) != artifact:
            return f"artifact {artifact_id.hex} would be changed or removed"
    for alias, ids in before.histories.items():
        if after.history(alias)[: len(ids)] != ids:
            return f"alias {alias}'s history would be rewritten"
    return None
