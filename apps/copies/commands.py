"""What ``nodeau models copy|copies`` shows and asks: the views and ``CopyCommands``.

A copy's state is the domain's (``copy_statuses``), read from the machines' reports; a
person's ask and a recovery's are kept apart, and taking one back deletes no file.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from attrs import frozen

from nodeau.domain.catalog import Catalog
from nodeau.ports.errors import NodeauError


@frozen(kw_only=True)
class CopyView:
    """One copy of ``nodeau models copies``: where, of what, its state, who asked."""

    machine: str
    model: str
    artifact: str  # SHA-256 hex
    state: str  # requested, waiting, fetching, verifying, ready, failed
    sentence: str
    bytes_done: int | None  # while waiting, fetching, verifying or failed, once known
    bytes_total: int | None
    asked_by: tuple[str, ...]  # "person", "recovery:<workload>"; empty: no one asked
    requested_at: datetime | None
    reported_at: datetime | None  # the machine's report the state is read from


@frozen(kw_only=True)
class CopyListing:
    """``nodeau models copies``: which plane, every copy."""

    plane: str
    copies: tuple[CopyView, ...]


@frozen(kw_only=True)
class CopyAsked:
    """What ``nodeau models copy`` did, and the copy as it stands now."""

    copy: CopyView
    sentence: str


class CopiesNeedAFleet(NodeauError):
    """Copies are kept between the machines of a fleet; one machine has none to keep."""


class CopyCommands(Protocol):
    """``nodeau models copy [--withdraw]`` and ``nodeau models copies`` on one plane."""

    def request(self, model: str, machine: str, catalog: Catalog) -> CopyAsked:
        """Ask ``machine`` to keep a verified copy of ``model`` (a name the fleet's reports
        or ``catalog`` know, an artifact id or prefix); its agent fetches and verifies it.
        ``UnknownMachine`` for a machine not in the fleet; ``CopiesNeedAFleet`` on one
        machine."""
        ...

    def withdraw(self, model: str, machine: str, catalog: Catalog) -> str:
        """Take a person's ask for a copy back; no file is deleted, and a copy a recovery
        relies on stays. The domain's sentence."""
        ...

    def listing(self) -> CopyListing:
        """Every copy on the fleet: each request in its state, and each verified model."""
        ...
