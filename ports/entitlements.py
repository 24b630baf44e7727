"""Ports of entitlements: checking a signed document, and keeping the installed one.

Why it is so: docs/adr/decisions/ports.md (entitlements.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from attrs import frozen

from nodeau.domain.entitlements import Verification
from nodeau.ports.errors import NodeauError

INSTALLATION_ID_MAX = 128


def installation_id_problem(text: str) -> str | None:
    """What is wrong with a kept installation id, or None."""
    if not text or not text.isprintable() or text != text.strip():
        return "is not printable text without surrounding spaces"
    if len(text) > INSTALLATION_ID_MAX:
        return f"is longer than {INSTALLATION_ID_MAX} characters"
    return None


class EntitlementStoreError(NodeauError):
    """What a store keeps could not be read or written; one line naming where."""


@frozen(kw_only=True)
class StoredEntitlement:
    """What a store keeps, as read: the id, the installed document, the anchor, and where."""

    installation_id: str
    document: bytes | None
    anchor: datetime | None
    where: str  # where the document is (or would be) kept, for a person


class EntitlementVerifier(Protocol):
    """Checks a document offline against the keys it was built with, and only those."""

    def verify(self, document: bytes) -> Verification:
        """The verdict on ``document``, its key id, and the entitlement when the signature is
        valid; any bytes at all give an answer, never an exception."""
        ...


class EntitlementStore(Protocol):
    """The installed entitlement, the installation's id and the clock anchor of one plane."""

    def read(self) -> StoredEntitlement:
        """What is kept now; the installation id is made and kept if there is none yet."""
        ...

    def install(self, document: bytes, seen: datetime) -> None:
        """Keep ``document`` whole in place of the installed one, and advance the anchor to
        ``seen`` if that is newer."""
        ...

    def remove(self, seen: datetime) -> bool:
        """Remove the installed document (the id and the anchor stay); whether there was one.
        Advances the anchor to ``seen`` if that is newer."""
        ...

    def advance_anchor(self, seen: datetime) -> None:
        """Record ``seen`` as the newest moment seen, if it is newer than the one kept."""
        ...


class KeptEntitlement(Protocol):
    """What a decision-maker reads of the installed entitlement, writing nothing."""

    def kept(self) -> StoredEntitlement | None:
        """What is kept now; None when nothing is (no installation id made yet, so no
        entitlement can be installed for it)."""
        ...
