"""The board kept between polls: the newest document, served at once, read again behind it.

Why it is so: docs/adr/decisions/apps-dashboard.md (board_cache.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger("nodeau.dashboard")

D = TypeVar("D")


class KeptBoard(Generic[D]):
    """The newest board document (as the data route sends it), and the read that replaces
    it."""

    def __init__(
        self,
        read: Callable[[], Awaitable[D]],
        *,
        refresh_s: float,
        max_age_s: float,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self.refresh_s = refresh_s
        self.max_age_s = max_age_s
        self._clock_s = clock_s
        self._document: D | None = None
        self._started_at = float("-inf")  # when the kept document's read started
        self._behind: asyncio.Task[D] | None = None
        self._rest_until = float("-inf")  # no read behind starts before then
        self._forgotten = 0  # how many times the one action made it forget
        self._behind_forgotten = 0  # that count when the read behind started

    async def read_now(self) -> D:
        """A fresh document (kept unless a read started later has finished first)."""
        started = self._clock_s()
        document = await self._read()
        ended = self._clock_s()
        self._rest_until = ended + (ended - started)
        if started >= self._started_at:
            self._document, self._started_at = document, started
        return document

    async def current(self, *, fresh: bool = False) -> D:
        """The document a poll is answered with (a fresh one when ``fresh``)."""
        kept = self._document
        age = self._clock_s() - self._started_at
        if fresh:
            return await self.read_now()
        if kept is None or age > self.max_age_s:
            behind = self._behind
            if behind is not None and self._behind_forgotten == self._forgotten:
                # shielded: a poll that goes away does not cancel the read others wait for
                return await asyncio.shield(behind)
            return await self.read_now()
        if age >= self.refresh_s and self._clock_s() >= self._rest_until:
            self.prefetch()
        return kept

    def prefetch(self) -> None:
        """Start a read behind, unless one is under way (at start-up: the first page then
        does not wait for a whole read)."""
        if self._behind is None:
            self._behind_forgotten = self._forgotten
            self._behind = asyncio.create_task(self.read_now())
            self._behind.add_done_callback(self._done)

    def forget(self) -> None:
        """Keep nothing: the next poll waits for a read (after the plane was changed)."""
        # a read that started before now may have seen the plane as it was: not kept either
        self._document, self._started_at = None, self._clock_s()
        self._forgotten += 1

    def _done(self, task: asyncio.Task[D]) -> None:
        self._behind = None
        if not task.cancelled() and task.exception() is not None:
            log.error("reading the board failed", exc_info=task.exception())
