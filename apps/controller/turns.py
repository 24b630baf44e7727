"""Decisions in the batch's order while the batch's requests overlap.

Why it is so: docs/adr/decisions/apps-controller.md (turns.py).
"""

from __future__ import annotations

import threading

from attrs import frozen


class Turns:
    """The turns of one batch's ``count`` objects, by their place in the sorted batch."""

    def __init__(self, count: int) -> None:
        self._passed = [False] * count
        self._next = 0  # the first place that has not passed yet
        self._changed = threading.Condition()

    def turn(self, place: int) -> Turn:
        """The turn of the object at ``place``."""
        if not 0 <= place < len(self._passed):
            raise ValueError(f"no place {place} in a batch of {len(self._passed)}")
        return Turn(turns=self, place=place)

    def wait(self, place: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._next >= place)

    def done(self, place: int) -> None:
        with self._changed:
            self._passed[place] = True
            while self._next < len(self._passed) and self._passed[self._next]:
                self._next += 1
            self._changed.notify_all()


@frozen
class Turn:
    """One object's turn to decide."""

    turns: Turns
    place: int

    def wait(self) -> None:
        """Until every object before this one has decided or finished."""
        self.turns.wait(self.place)

    def done(self) -> None:
        """This object has decided (or will not): the next may decide. Idempotent."""
        self.turns.done(self.place)
