"""The board kept between polls: served at once, read again behind it, read fresh when
asked, when too old, when nothing is kept or after the one action
(apps/dashboard/board_cache.py)."""

from __future__ import annotations

import asyncio

from nodeau.apps.dashboard.board_cache import KeptBoard
from tests.support.clock import Clock


class Reads:
    """A plane read that answers with its count, waiting for ``release`` when ``held``."""

    def __init__(self) -> None:
        self.count = 0
        self.held = False
        self.release = asyncio.Event()

    async def __call__(self) -> bytes:
        self.count += 1
        n = self.count
        if self.held:
            await self.release.wait()
        return f"read {n}".encode()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def kept(reads: Reads, clock: Clock[float]) -> KeptBoard:
    return KeptBoard(reads, refresh_s=2.0, max_age_s=30.0, clock_s=clock)


def test_a_poll_is_answered_from_the_kept_board_and_a_read_starts_behind_it() -> None:
    async def scenario() -> None:
        reads, clock = Reads(), Clock(100.0)
        board = kept(reads, clock)
        assert await board.current() == b"read 1"  # nothing kept: the first poll waits
        clock.now += 1.0
        assert await board.current() == b"read 1"  # younger than refresh_s: no read
        assert reads.count == 1
        clock.now += 1.5
        reads.held = True
        assert await board.current() == b"read 1"  # old: answered at once, read behind
        await settle()
        assert reads.count == 2
        assert await board.current() == b"read 1"  # one read at a time behind the polls
        assert reads.count == 2
        reads.release.set()
        await settle()
        assert await board.current() == b"read 2"

    asyncio.run(scenario())


def test_a_fresh_poll_a_too_old_board_and_the_action_wait_for_a_read() -> None:
    async def scenario() -> None:
        reads, clock = Reads(), Clock(100.0)
        board = kept(reads, clock)
        await board.current()
        assert await board.current(fresh=True) == b"read 2"  # Cache-Control: no-cache
        clock.now += 31.0
        assert await board.current() == b"read 3"  # older than max_age_s
        board.forget()
        assert await board.current() == b"read 4"  # after the one action

    asyncio.run(scenario())


def test_a_read_that_started_before_the_action_is_not_kept() -> None:
    async def scenario() -> None:
        reads, clock = Reads(), Clock(100.0)
        board = kept(reads, clock)
        await board.current()
        clock.now += 3.0
        reads.held = True
        await board.current()  # starts read 2 behind the poll; it waits
        await settle()
        clock.now += 0.5
        board.forget()  # the batch job stopped while read 2 was under way
        reads.held = False
        answered = await board.current()  # read 3, started after the stop
        reads.release.set()
        await settle()
        assert answered == b"read 3"
        assert await board.current() == b"read 3"  # read 2 finished later: not kept

    asyncio.run(scenario())


def test_the_first_poll_waits_for_the_read_started_with_the_server_not_a_second_one() -> None:
    async def scenario() -> None:
        reads, clock = Reads(), Clock(100.0)
        board = kept(reads, clock)
        reads.held = True
        board.prefetch()  # as the server starts
        await settle()
        first = asyncio.create_task(board.current())
        second = asyncio.create_task(board.current())
        await settle()
        assert reads.count == 1
        reads.release.set()
        assert await first == await second == b"read 1"
        assert reads.count == 1

    asyncio.run(scenario())


def test_a_poll_after_the_action_does_not_wait_for_a_read_started_before_it() -> None:
    async def scenario() -> None:
        reads, clock = Reads(), Clock(100.0)
        board = kept(reads, clock)
        reads.held = True
        board.prefetch()
        await settle()
        board.forget()  # the batch job stopped while read 1 was under way
        reads.held = False
        assert await board.current() == b"read 2"
        reads.release.set()

    asyncio.run(scenario())


class SlowReads(Reads):
    """Reads that take ``takes_s`` on the clock."""

    def __init__(self, clock: Clock[float], takes_s: float) -> None:
        super().__init__()
        self.clock = clock
        self.takes_s = takes_s

    async def __call__(self) -> bytes:
        self.clock.now += self.takes_s
        return await super().__call__()


def test_a_slow_read_is_followed_by_as_long_a_rest_before_the_next_read_behind() -> None:
    async def scenario() -> None:
        clock = Clock(100.0)
        reads = SlowReads(clock, takes_s=3.0)
        board = kept(reads, clock)
        assert await board.current() == b"read 1"  # read from 100 to 103
        assert await board.current() == b"read 1"  # 3 s old, but the read rests until 106
        await settle()
        assert reads.count == 1
        clock.now = 105.9
        await board.current()
        await settle()
        assert reads.count == 1
        clock.now = 106.0
        assert await board.current() == b"read 1"  # answered at once, read 2 behind it
        await settle()
        assert reads.count == 2
        assert await board.current() == b"read 2"
        reads.takes_s = 0.5  # a fast read rests no longer than refresh_s asks
        assert await board.current(fresh=True) == b"read 3"  # from 109 to 109.5
        clock.now = 109.0 + 2.0
        await board.current()
        await settle()
        assert reads.count == 4

    asyncio.run(scenario())
