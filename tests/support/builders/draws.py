"""Random draws for the probe tests, made to collide.

``RepeatingDraws`` is a seeded ``random.Random`` whose first samples all come out the
same, so two keys a probe draws are alike and it must draw again.
"""

from __future__ import annotations

import random
from typing import Any


class RepeatingDraws(random.Random):
    """Random draws whose first ``repeats`` samples are all the same: two keys collide."""

    def __init__(self, repeats: int) -> None:
        super().__init__(7)
        self._repeats = repeats

    def sample(self, population: Any, k: int, *, counts: Any = None) -> list[Any]:
        if self._repeats > 0:
            self._repeats -= 1
            return list(population[:k])
        return super().sample(population, k)
