"""Port of the artifact registry: artifacts, aliases and measurements that persist."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from nodeau.domain.aliases import AliasBook
from nodeau.domain.memory import MeasuredTable, Measurement

T = TypeVar("T")


class ArtifactRegistry(Protocol):
    """Every artifact this installation knows, its aliases, and measured peaks.

    Artifact records and alias histories only grow: ``update`` may add, never
    change or remove, and an implementation refuses (ValueError) a change that
    would.
    """

    def book(self) -> AliasBook:
        """The alias book as it is now."""
        ...

    def update(self, change: Callable[[AliasBook], tuple[AliasBook, T]]) -> T:
        """Apply ``change`` to the current book atomically and keep its result.

        Concurrent updates from several processes are serialised: each sees
        the book as the previous one left it.
        """
        ...

    def measurements(self) -> MeasuredTable:
        """Every measured peak recorded on this installation (possibly none)."""
        ...

    def record_measurement(self, measurement: Measurement) -> None:
        """Keep a measured peak; a newer one of the same key wins."""
        ...
