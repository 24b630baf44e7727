"""Port of the artifact registry: artifacts, aliases, measurements and qualification
evidence that persist."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from nodeau.domain.aliases import AliasBook
from nodeau.domain.memory import MeasuredTable, Measurement
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence

T = TypeVar("T")


class ArtifactRegistry(Protocol):
    """Every artifact this installation knows, its aliases, measured peaks and the
    evidence of every qualification run.

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

    def evidence(self) -> EvidenceBook:
        """Every qualification run recorded here, per artifact, oldest first."""
        ...

    def record_evidence(self, evidence: QualificationEvidence) -> None:
        """Keep one qualification run under its own artifact (never under an alias)."""
        ...
