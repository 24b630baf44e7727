"""Which artifact a model name means: one rule for every plane.

Why it is so: docs/adr/decisions/domain.md (resolution.py).
"""

from __future__ import annotations

import difflib
import enum
import string
from collections.abc import Iterable

from attrs import frozen

MIN_PREFIX = 6
SHORT_ID = 12
CLOSE_NAMES = 3  # at most this many names are suggested for a typo


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
            f"(at least {MIN_PREFIX} hex digits) matches"
            + did_you_mean(text, (n for k in candidates for n in k.names)),
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


def close_names(text: str, names: Iterable[str]) -> tuple[str, ...]:
    """The names a person who typed ``text`` may have meant: every name containing it (in
    any case), else up to ``CLOSE_NAMES`` that difflib finds alike; sorted, each once."""
    lowered = text.lower()
    if not lowered:
        return ()
    known = sorted(set(names))
    containing = tuple(n for n in known if lowered in n.lower())
    if containing:
        return containing
    by_lower = {n.lower(): n for n in known}
    alike = difflib.get_close_matches(lowered, list(by_lower), n=CLOSE_NAMES)
    return tuple(sorted(by_lower[a] for a in alike))


def did_you_mean(text: str, names: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` naming :func:`close_names`, or ``""`` when none is close."""
    close = close_names(text, names)
    return f"; did you mean {', '.join(close)}?" if close else ""


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


@frozen(kw_only=True)
class Candidate:
    """A workload that serves here, and what its model goes by (as ``names_served`` takes)."""

    workload: str
    names: tuple[str, ...] = ()
    artifact_id: str = ""


def chosen_workloads(asked: str, candidates: Iterable[Candidate]) -> frozenset[str]:
    """The workloads a request's ``model`` names among ``candidates``: the one of that name
    when there is one, else every one whose model it names (several: ambiguous)."""
    listed = tuple(candidates)
    exact = frozenset(c.workload for c in listed if c.workload == asked)
    if exact:
        return exact
    return frozenset(
        c.workload for c in listed if names_served(asked, (c.workload, *c.names), c.artifact_id)
    )
