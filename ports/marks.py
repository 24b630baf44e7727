"""Port of a person's scheduling marks: drained machines and the scheduling policy.

Marks change what happens to new placements only; writing one never touches
a running workload.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from nodeau.domain.marking import Marks


class SchedulingMarks(Protocol):
    """Drained machines and the policy, kept where the plane keeps its state."""

    def read(self) -> Marks:
        """The marks now (none recorded: nothing drained, the default policy)."""
        ...

    def change(self, change: Callable[[Marks], Marks]) -> Marks:
        """Replace the marks by ``change(marks)`` atomically; the marks written."""
        ...
