"""``CopyCommands`` on one machine: refused, naming what this machine's own models use.

A copy is kept for a recovery to move a service onto another machine; a machine alone has
none, and its own files are ``nodeau model status``'s.
"""

from __future__ import annotations

from nodeau.apps.copies.commands import CopiesNeedAFleet, CopyAsked, CopyListing
from nodeau.domain.catalog import Catalog

NO_COPIES = (
    "copies are kept between the machines of a fleet (nodeau join); this machine's own "
    "models: nodeau model status, nodeau models pull NAME, nodeau models import FILE"
)


class NoCopies:
    """``CopyCommands`` where the plane is this machine alone: every command says why not."""

    def request(self, model: str, machine: str, catalog: Catalog) -> CopyAsked:
        raise CopiesNeedAFleet(NO_COPIES)

    def withdraw(self, model: str, machine: str, catalog: Catalog) -> str:
        raise CopiesNeedAFleet(NO_COPIES)

    def listing(self) -> CopyListing:
        raise CopiesNeedAFleet(NO_COPIES)
