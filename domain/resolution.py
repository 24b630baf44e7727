"""Which artifact a model name means: one rule for every plane.

A person types an alias, a catalog name, an artifact's SHA-256 or a prefix of
it. The CLI resolves it among what this machine knows (aliases, the catalog);
the controller among what the fleet's machines report verified. Both ask
:func:`resolve_name`. Decisions recorded here:

* A name is tried before an id: an exact name (alias, catalog name, a name a
  machine reports) wins over a hex prefix that happens to match.
* An id is the full SHA-256 or a prefix of at least ``MIN_PREFIX`` hex digits,
  with or without ``sha256:``, in any case.
* Several different artifacts matching at the winning tier is ambiguous:
  nothing is guessed, and the answer names them so the person can pick one
  by its SHA-256 prefix.
* The name a person reads (``ps``, ``explain``) is what they typed when it is
  one of the artifact's names, else its first name, else its short id.
* A served workload answers a request's ``model`` by the same rule: any of its
  artifact's names (as admitted), its own name, its id or an id prefix.
"""

from __future__ import annotations

import enum
import string
from collections.abc import Iterable

from attrs import frozen

MIN_PREFIX = 6
SHORT_ID = 12


@frozen(kw_only=True)
class Known:
    """One artifact the resolver may choose, and the names it goes by there."""

    artifact_id: str  # SHA-256 hex
    names: tuple[str, ...] = ()
    where: str = ""  # a machine that holds it, for the ambiguity sentence ("" when local)


class Miss(str, enum.Enum):
    """Why a text names no single artifact."""

    UNKNOWN = "unknown"
    AMBIGUOUS = "ambiguous"


@frozen(kw_only=True)
class Unresolved:
    """No single artifact: why, and one sentence for a person."""

    miss: Miss
    sentence: str


@frozen(kw_only=True)
class Resolution:
    """The one artifact a text names, every name it goes by, and where it was found."""

    artifact_id: str
    names: tuple[str, ...]
    where: tuple[str, ...]


def id_prefix(text: str) -> str | None:
    """The hex id or prefix ``text`` gives, lower case; None when it cannot be one."""
    prefix = text.lower().removeprefix("sha256:")
    if len(prefix) < MIN_PREFIX or any(c not in string.hexdigits for c in prefix):
        return None
    return prefix


def resolve_name(text: str, known: Iterable[Known]) -> Resolution | Unresolved:
    """The one artifact ``text`` names among ``known`` (names first, then ids)."""
    candidates = tuple(known)
    named = [k for k in candidates if text in k.names]
    prefix = id_prefix(text)
    by_id = [k for k in candidates if prefix is not None and k.artifact_id.startswith(prefix)]
    found = named or by_id
    ids = sorted({k.artifact_id for k in found})
    if not ids:
        return Unresolved(
            miss=Miss.UNKNOWN,
            sentence=f"{text}: no alias, catalog model or artifact id "
            f"(at least {MIN_PREFIX} hex digits) matches",
        )
    if len(ids) > 1:
        listed = "; ".join(_artifact_where(i, found) for i in ids)
        return Unresolved(
            miss=Miss.AMBIGUOUS,
            sentence=f"{text} names {len(ids)} different artifacts ({listed}); "
            "ask for one by its SHA-256 prefix",
        )
    same = [k for k in candidates if k.artifact_id == ids[0]]
    return Resolution(
        artifact_id=ids[0],
        names=tuple(sorted({n for k in same for n in k.names})),
        where=tuple(sorted({k.where for k in same if k.where})),
    )


def _artifact_where(artifact_id: str, found: list[Known]) -> str:
    machines = sorted({k.where for k in found if k.artifact_id == artifact_id and k.where})
    return artifact_id[:SHORT_ID] + (f" on {', '.join(machines)}" if machines else "")


def display_name(asked: str | None, names: tuple[str, ...], artifact_id: str) -> str:
    """The name a person reads: what they typed when it is a name, else a name, else the id."""
    if asked is not None and asked in names:
        return asked
    return names[0] if names else artifact_id[:SHORT_ID]


def names_served(asked: str, names: Iterable[str], artifact_id: str) -> bool:
    """Whether a request's ``model`` text names the artifact served: one of ``names`` (the
    workload's own, its model's, its artifact's aliases and catalog names), or its id or
    an id prefix as ``resolve_name`` takes one."""
    if asked in names:
        return True
    prefix = id_prefix(asked)
    return prefix is not None and artifact_id.lower().startswith(prefix)
