"""An in-memory ArtifactRegistry, checked by the same contract suite as SQLite's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from nodeau.domain.aliases import AliasBook, append_only_problem
from nodeau.domain.memory import MeasuredTable, Measurement
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence, record

T = TypeVar("T")


class FakeRegistry:
    def __init__(self) -> None:
        self._book = AliasBook.empty()
        self._measurements: list[Measurement] = []
        self._evidence = EvidenceBook.empty()

    def book(self) -> AliasBook:
        return self._book

    def update(self, change: Callable[[AliasBook], tuple[AliasBook, T]]) -> T:
        after, result = change(self._book)
        problem = append_only_problem(self._book, after)
        if problem is not None:
            raise ValueError(problem)
        self._book = after
        return result

    def measurements(self) -> MeasuredTable:
        return MeasuredTable(measurements=tuple(self._measurements))

    def record_measurement(self, measurement: Measurement) -> None:
        self._measurements.append(measurement)

    def evidence(self) -> EvidenceBook:
        return self._evidence

    def record_evidence(self, evidence: QualificationEvidence) -> None:
        self._evidence = record(self._evidence, evidence)
