"""A response's head sent with its body (``request_head.HeadWithBody``), against a transport
that records its writes: the head waits for the next write or the end of the loop's turn,
never longer, and never goes after a close."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from nodeau.apps.endpoint.request_head import HELD_JOIN_BYTES, HeadWithBody

T = TypeVar("T")
HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.events.append(("write", bytes(data)))

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self.events.append(("writelines", b"|".join(bytes(p) for p in list_of_data)))

    def close(self) -> None:
        self.closing = True
        self.events.append(("close", b""))

    def is_closing(self) -> bool:
        return self.closing


def within_a_loop(
    make: Callable[[Recording, HeadWithBody], Awaitable[T]],
) -> list[tuple[str, bytes]]:
    async def go() -> list[tuple[str, bytes]]:
        raw = Recording()
        async with asyncio.timeout(10):
            await make(raw, HeadWithBody(raw, asyncio.get_running_loop()))
        return raw.events

    return asyncio.run(go())


def test_a_head_and_body_written_in_one_turn_go_out_in_one_write() -> None:
    async def respond(raw: Recording, seen: HeadWithBody) -> None:
        seen.write(HEAD)
        seen.write(b"ok")
        seen.write(b"")  # uvicorn's end of a body with a length
        await asyncio.sleep(0)

    assert within_a_loop(respond) == [("write", HEAD + b"ok"), ("write", b"")]


def test_a_head_alone_leaves_at_the_end_of_the_turn_and_the_body_follows() -> None:
    async def respond(raw: Recording, seen: HeadWithBody) -> None:
        seen.write(HEAD)
        assert raw.events == []
        await asyncio.sleep(0)
        assert raw.events == [("write", HEAD)]
        seen.write(b"ok")

    assert within_a_loop(respond) == [("write", HEAD), ("write", b"ok")]


def test_a_held_head_goes_before_the_close() -> None:
    async def respond(raw: Recording, seen: HeadWithBody) -> None:
        seen.write(HEAD)
        seen.close()
        await asyncio.sleep(0)

    assert within_a_loop(respond) == [("write", HEAD), ("close", b"")]


def test_a_large_body_is_not_copied_to_join_its_head() -> None:
    body = b"x" * HELD_JOIN_BYTES

    async def respond(raw: Recording, seen: HeadWithBody) -> None:
        seen.write(HEAD)
        seen.write(body)

    assert within_a_loop(respond) == [("writelines", HEAD + b"|" + body)]
