"""The Lease one controller holds to lead: what is read of it, and the port that reads,
creates and replaces it.

Why it is so: docs/adr/0015-leader-election.md.
"""

from __future__ import annotations

from typing import Protocol

from attrs import frozen

from nodeau.domain.leadership import LeaseRecord
from nodeau.ports.cluster import ClusterError


class NotLeading(ClusterError):
    """A controller that does not lead (any more) was about to write; it writes nothing."""


@frozen(kw_only=True)
class LeaseRead:
    """The leader Lease as read or as written: what it says, and its resourceVersion."""

    record: LeaseRecord
    version: str


class LeaderLease(Protocol):
    """The one Lease the fleet's controllers elect their leader with. Every write is
    conditional: a create fails when the Lease exists, a replace when it changed since
    ``version`` was read (someone else won; read again)."""

    def read(self) -> LeaseRead | None:
        """The Lease now, or None when there is none yet."""
        ...

    def create(self, record: LeaseRecord) -> LeaseRead | None:
        """Create the Lease saying ``record``; None when another created it first."""
        ...

    def replace(self, record: LeaseRecord, version: str) -> LeaseRead | None:
        """Replace the Lease read at ``version`` by ``record``; None when it changed or went
        since (409 or 404: read again)."""
        ...
