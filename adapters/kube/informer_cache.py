"""What one controller process last saw of the objects it acts on: an informer's cache.

Why it is so: docs/adr/decisions/adapters-kube.md (informer_cache.py).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal

Body = Mapping[str, Any]


class Unknown(enum.Enum):
    """``lookup``'s answer when only the API server can tell."""

    UNKNOWN = "unknown"


UNKNOWN = Unknown.UNKNOWN


def version_of(body: Body) -> int:
    """The body's resourceVersion as the integer it is (0 when it has none that reads)."""
    text = (body.get("metadata") or {}).get("resourceVersion") or "0"
    try:
        return int(text)
    except ValueError:
        return 0


def _name(body: Body) -> str:
    return str(body["metadata"]["name"])


class KnownObjects:
    """The bodies last seen per kind (a plural: ``gpuservices``, ``pods``) and name;
    safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: dict[str, dict[str, Body]] = {}
        self._gone: dict[str, dict[str, int]] = {}  # tombstones: the version deleted at
        self._complete: set[str] = set()
        self._unsure: dict[str, set[str]] = {}  # names only the API server can tell

    def lookup(self, plural: str, name: str) -> Body | Literal[Unknown.UNKNOWN] | None:
        """The body known, None when the kind is complete and has no such name, else
        ``UNKNOWN``."""
        with self._lock:
            if name in self._unsure.get(plural, ()):
                return UNKNOWN
            found = self._bodies.get(plural, {}).get(name)
            if found is not None:
                return found
            return None if plural in self._complete else UNKNOWN

    def seen(self, plural: str, body: Body) -> None:
        """Keep ``body`` if it is newer than what is known of its name."""
        name, version = _name(body), version_of(body)
        with self._lock:
            bodies = self._bodies.setdefault(plural, {})
            known = bodies.get(name)
            if known is not None and version_of(known) > version:
                return
            if self._gone.get(plural, {}).get(name, -1) >= version:
                return
            bodies[name] = body
            self._unsure.get(plural, set()).discard(name)

    def gone(self, plural: str, name: str, version: int = 0) -> None:
        """The object was deleted (at ``version``, when its deletion said one)."""
        with self._lock:
            bodies = self._bodies.setdefault(plural, {})
            known = bodies.get(name)
            if known is not None and version_of(known) > version > 0:
                return  # a newer object of the same name was seen since
            bodies.pop(name, None)
            self._unsure.get(plural, set()).discard(name)
            tombstones = self._gone.setdefault(plural, {})
            at = max(version, 0 if known is None else version_of(known))
            tombstones[name] = max(at, tombstones.get(name, 0))

    def forget(self, plural: str, name: str) -> None:
        """The next read of this name asks the API server."""
        with self._lock:
            self._bodies.get(plural, {}).pop(name, None)
            self._unsure.setdefault(plural, set()).add(name)

    def listed(self, plural: str, items: Iterable[Body], version: int) -> None:
        """A complete list of the kind, made at ``version``."""
        fresh = {_name(item): item for item in items}
        with self._lock:
            bodies = self._bodies.setdefault(plural, {})
            tombstones = self._gone.setdefault(plural, {})
            kept: dict[str, Body] = {}
            for name, item in fresh.items():
                known = bodies.get(name)
                newer = known is not None and version_of(known) > version_of(item)
                kept[name] = known if newer and known is not None else item
            for name, known in bodies.items():
                if name not in fresh and version_of(known) > version:
                    kept[name] = known  # created since the list was made
            self._bodies[plural] = kept
            self._gone[plural] = {n: v for n, v in tombstones.items() if v > version}
            self._unsure[plural] = set()
            self._complete.add(plural)

    def bodies(self, plural: str) -> tuple[Body, ...]:
        """Every body known of the kind, by name."""
        with self._lock:
            found = self._bodies.get(plural, {})
            return tuple(found[name] for name in sorted(found))
