"""The one clock the tests hand to code that asks for the time.

``Clock(now)`` says ``now`` until the test moves it (``clock.now = ...`` or
``clock.now += ...``); ``Clock(now, step)`` also moves itself ``step`` later after
each call. ``now`` is whatever the code reads: a ``datetime`` or seconds as a ``float``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, Self, TypeVar


class _Steps(Protocol):
    def __add__(self, step: Any, /) -> Self: ...


T = TypeVar("T", bound=_Steps)


class Clock(Generic[T]):
    """``now`` on every call, then ``step`` later if there is a step."""

    def __init__(self, now: T, step: Any = None) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> T:
        now = self.now
        if self.step is not None:
            self.now = now + self.step
        return now


def ticking(
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC), step: timedelta = timedelta(seconds=1)
) -> Clock[datetime]:
    """``start``, then one ``step`` later on every call: a store's clock that never repeats."""
    return Clock(start, step)
