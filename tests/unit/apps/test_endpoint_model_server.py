"""The endpoint's connection to its model server (``nodeau.apps.endpoint.model_server``),
driven byte by byte: a transport that records what is written, and answers fed to the
protocol in whatever pieces a test chooses, as asyncio would deliver them. Every answer
either reads whole, or ends in one of the endpoint's errors; nothing hangs (each test's
loop is bounded), nothing else is raised."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest
from attrs import frozen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeau.apps.endpoint.connections import Target, request_head
from nodeau.apps.endpoint.model_server import (
    HIGH_WATER,
    MAX_HEAD_BYTES,
    Answer,
    BadAnswer,
    BrokeOff,
    ModelServerConnection,
    NotSent,
    UpstreamError,
)

BOUND_S = 10.0
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\n\r\n"
T = TypeVar("T")


class RecordingTransport:
    """What asyncio's transport does for the protocol: writes recorded, reading paused and
    resumed, and a close that reaches the protocol at the next turn of the loop."""

    def __init__(self, protocol: ModelServerConnection) -> None:
        self.protocol = protocol
        self.written: list[bytes] = []
        self.closing = False
        self.reading = True

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after the close"
        self.written.append(bytes(data))

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


@frozen
class Read:
    """How one exchange ended: the answer's status, headers and body, whether the body was
    whole, the error if any, and whether the connection may carry another request."""

    status: int | None
    headers: list[tuple[bytes, bytes]]
    body: bytes
    whole: bool
    error: UpstreamError | None
    reusable: bool


def bounded(make: Callable[[], Awaitable[T]]) -> T:
    async def within() -> T:
        async with asyncio.timeout(BOUND_S):
            return await make()

    return asyncio.run(within())


def connected() -> tuple[ModelServerConnection, RecordingTransport]:
    connection = ModelServerConnection()
    transport = RecordingTransport(connection)
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


async def read_all(answer: Answer) -> tuple[bytes, UpstreamError | None]:
    """The body as the endpoint relays it: whatever has arrived, until it is complete."""
    body = b""
    try:
        while True:
            body += answer.take()
            if answer.complete:
                return body, None
            await answer.arrival()
    except UpstreamError as exc:
        return body + answer.take(), exc


async def exchange(pieces: Sequence[bytes], *, then_close: bool = True) -> Read:
    """Send one request, and feed ``pieces`` to the connection one turn of the loop apart,
    as the reader takes them; then the server closes (``then_close``)."""
    connection, transport = connected()

    async def serve() -> None:
        for piece in pieces:
            await asyncio.sleep(0)
            if transport.closing:
                return
            connection.data_received(piece)
        await asyncio.sleep(0)
        if then_close and not transport.closing:
            transport.close()

    server = asyncio.get_running_loop().create_task(serve())
    try:
        answer = await connection.request(HEAD, b"{}", None)
    except UpstreamError as exc:
        await server
        return Read(None, [], b"", False, exc, connection.reusable())
    body, error = await read_all(answer)
    await server
    await asyncio.sleep(0)  # a close reaches the protocol
    whole = answer.complete
    answer.close()
    return Read(answer.status, answer.headers, body, whole, error, connection.reusable())


def run(pieces: Sequence[bytes], *, then_close: bool = True) -> Read:
    return bounded(lambda: exchange(pieces, then_close=then_close))


def chunked(parts: Sequence[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"


BODY = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n' * 3
ANSWERS = {
    "content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(BODY), BODY)
    ),
    "chunked": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n" + chunked([BODY[:7], BODY[7:60], BODY[60:]]),
    "until-close": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + BODY,
}


# -- framing


@pytest.mark.parametrize("framing", ANSWERS)
def test_an_answer_split_at_every_byte_boundary_reads_the_same(framing: str) -> None:
    raw = ANSWERS[framing]
    until_close = framing == "until-close"
    reads = [run([raw[:cut], raw[cut:]], then_close=until_close) for cut in range(1, len(raw))]
    assert all(r == reads[0] for r in reads)
    read = reads[0]
    assert (read.status, read.body, read.whole, read.error) == (200, BODY, True, None)
    assert read.reusable is (framing != "until-close")  # that one ended with the close


def test_an_answer_fed_one_byte_at_a_time_reads_whole() -> None:
    raw = ANSWERS["chunked"]
    read = run([raw[i : i + 1] for i in range(len(raw))], then_close=False)
    assert (read.status, read.body, read.whole, read.reusable) == (200, BODY, True, True)


def test_the_request_goes_out_in_one_write_head_then_body() -> None:
    async def go() -> list[bytes]:
        connection, transport = connected()
        waiting = asyncio.get_running_loop().create_task(connection.request(HEAD, b"{}", None))
        await asyncio.sleep(0)
        connection.data_received(b"HTTP/1.1 204 No Content\r\n\r\n")
        (await waiting).close()
        return transport.written

    assert bounded(go) == [HEAD + b"{}"]


def test_headers_are_kept_as_sent_in_order_with_repeats() -> None:
    raw = (
        b"HTTP/1.1 201 Created\r\nX-A: 1\r\nset-cookie: a\r\nSet-Cookie: b\r\n"
        b"Content-Length: 0\r\n\r\n"
    )
    read = run([raw], then_close=False)
    assert read.status == 201
    assert read.headers == [
        (b"X-A", b"1"),
        (b"set-cookie", b"a"),
        (b"Set-Cookie", b"b"),
        (b"Content-Length", b"0"),
    ]


@pytest.mark.parametrize(
    "interim",
    [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"],
)
def test_an_interim_answer_is_skipped_and_the_final_one_read(interim: bytes) -> None:
    read = run([interim, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], then_close=False)
    assert (read.status, read.headers, read.body, read.reusable) == (
        200,
        [(b"Content-Length", b"2")],
        b"ok",
        True,
    )


# -- when the connection is not reused


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n",  # one more
    ],
    ids=["connection-close", "http-1.0", "bytes-after-the-answer"],
)
def test_a_connection_is_not_reused_after_an_answer_that_says_so_or_overruns(raw: bytes) -> None:
    read = run([raw], then_close=False)
    assert (read.status, read.body, read.whole) == (200, b"ok", True)
    assert read.reusable is False


def test_bytes_on_an_idle_connection_close_it() -> None:
    async def go() -> bool:
        connection, _ = connected()
        waiting = asyncio.get_running_loop().create_task(connection.request(HEAD, b"{}", None))
        await asyncio.sleep(0)
        connection.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        (await waiting).close()
        assert connection.reusable()
        connection.data_received(b"HTTP/1.1 408 Request Timeout\r\n\r\n")  # nobody asked
        return connection.reusable()

    assert bounded(go) is False


def test_a_closed_connection_sends_nothing() -> None:
    async def go() -> tuple[NotSent, list[bytes]]:
        connection, transport = connected()
        connection.connection_lost(None)
        with pytest.raises(NotSent) as caught:
            await connection.request(HEAD, b"{}", None)
        return caught.value, transport.written

    error, written = bounded(go)
    assert str(error) == "the connection closed before the request was sent"
    assert written == []


@pytest.mark.parametrize(
    "header",
    [
        (b"x-a", b"a\nInjected: b"),
        (b"x-a", b"a\rInjected: b"),
        (b"x-a", b"a\r\nInjected: b"),
        (b"x-a\r\nInjected", b"b"),
    ],
)
def test_a_header_with_a_line_break_is_not_sent(header: tuple[bytes, bytes]) -> None:
    target = Target(host="127.0.0.1", port=8080, host_header=b"127.0.0.1:8080", path=b"/v1")
    with pytest.raises(NotSent) as caught:
        request_head(b"POST", target, [(b"x-ok", b"1"), header], 2)
    assert str(caught.value) == "a request header holds a line break; it was not sent"
    assert request_head(b"POST", target, [(b"x-ok", b"1")], 2) == (
        b"POST /v1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nx-ok: 1\r\nContent-Length: 2\r\n\r\n"
    )


# -- answers that are not answers


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ([], "it closed the connection without an answer"),
        ([b"HTTP/1.1 200 OK\r\nContent-"], "it closed the connection mid-head"),
        ([b"garbage\r\n\r\n"], "its answer is not valid HTTP/1.1: Expected HTTP/"),
        ([b"HTTP/1.1 2x0 OK\r\n\r\n"], "its answer is not valid HTTP/1.1: "),
        (
            [b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"],
            "its answer is not valid HTTP/1.1: Duplicate Content-Length",
        ),
        (
            [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"],
            "its answer is not valid HTTP/1.1: it switched protocols (101), which nobody asked for",
        ),
    ],
    ids=["nothing", "half-a-head", "garbage", "bad-status", "two-lengths", "upgrade"],
)
def test_no_valid_head_is_a_bad_answer_naming_why(pieces: list[bytes], message: str) -> None:
    read = run(pieces)
    assert isinstance(read.error, BadAnswer)
    assert str(read.error).startswith(message)
    assert read.reusable is False


def test_a_head_over_the_bound_is_a_bad_answer_and_reading_stops() -> None:
    async def go() -> tuple[UpstreamError, bool]:
        connection, transport = connected()
        waiting = asyncio.get_running_loop().create_task(connection.request(HEAD, b"{}", None))
        await asyncio.sleep(0)
        connection.data_received(b"HTTP/1.1 200 OK\r\n")
        line = b"X-Endless: " + b"v" * 1000 + b"\r\n"
        fed = 0
        while not transport.closing:
            connection.data_received(line)
            fed += len(line)
            assert fed <= MAX_HEAD_BYTES + len(line), "kept reading past the bound"
        with pytest.raises(BadAnswer) as caught:
            await waiting
        return caught.value, connection.reusable()

    error, reusable = bounded(go)
    assert (
        str(error)
        == f"its answer is not valid HTTP/1.1: its head is larger than {MAX_HEAD_BYTES // 1024} KiB"
    )
    assert reusable is False


@pytest.mark.parametrize(
    ("raw", "arrived", "message"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            b"abc",
            "it closed the connection mid-answer",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n",
            b"abc",
            "its answer broke off: Invalid character in chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
            b"abc",
            "it closed the connection mid-answer",
        ),
    ],
    ids=["short-of-its-length", "bad-chunk", "stream-cut"],
)
def test_a_body_cut_short_is_broke_off_after_what_arrived(
    raw: bytes, arrived: bytes, message: str
) -> None:
    read = run([raw])
    assert read.status == 200
    assert read.body == arrived
    assert read.whole is False
    assert isinstance(read.error, BrokeOff)
    assert str(read.error) == message
    assert read.reusable is False


# -- flow control


def test_reading_pauses_while_a_slow_client_leaves_the_body_untaken() -> None:
    async def go() -> list[bool]:
        connection, transport = connected()
        waiting = asyncio.get_running_loop().create_task(connection.request(HEAD, b"{}", None))
        await asyncio.sleep(0)
        connection.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        answer = await waiting
        seen = [transport.reading]
        part = b"x" * 4096
        for _ in range(2 * HIGH_WATER // len(part)):  # one chunk at a time, no end
            connection.data_received(chunked([part])[:-5])
        seen.append(transport.reading)
        assert answer.buffered > HIGH_WATER
        taken = answer.take()
        seen.append(transport.reading)
        assert len(taken) > HIGH_WATER
        assert answer.buffered == 0
        answer.close()
        return seen

    assert bounded(go) == [True, False, True]


def test_a_write_the_server_never_takes_is_not_sent_within_the_write_timeout() -> None:
    async def go() -> tuple[NotSent, bool]:
        connection, _ = connected()
        connection.pause_writing()  # the socket's buffer is full and stays full
        with pytest.raises(NotSent) as caught:
            await connection.request(HEAD, b"{}", 0.01)
        await asyncio.sleep(0)
        return caught.value, connection.reusable()

    error, reusable = bounded(go)
    assert str(error) == "the model server took nothing for 0.01 s"
    assert reusable is False


def test_a_full_buffer_that_drains_lets_the_request_go_on() -> None:
    async def go() -> Read:
        connection, _ = connected()
        connection.pause_writing()
        loop = asyncio.get_running_loop()
        waiting = loop.create_task(connection.request(HEAD, b"{}", BOUND_S))
        await asyncio.sleep(0)
        connection.resume_writing()
        await asyncio.sleep(0)
        connection.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        answer = await waiting
        body, error = await read_all(answer)
        answer.close()
        return Read(answer.status, [], body, answer.complete, error, connection.reusable())

    read = bounded(go)
    assert (read.status, read.body, read.reusable) == (200, b"ok", True)


# -- fuzzing the parsing edge

framings = st.sampled_from(["content-length", "chunked", "until-close"])
header_names = st.from_regex(rb"\AX-[A-Za-z0-9-]{1,12}\Z")
header_values = st.from_regex(rb"\A[ -~]{0,40}\Z").map(bytes.strip)


@st.composite
def answers(draw: Any) -> tuple[bytes, int, list[tuple[bytes, bytes]], bytes, str]:
    framing = draw(framings)
    status = draw(st.sampled_from([200, 201, 400, 404, 500, 503]))
    headers = draw(st.lists(st.tuples(header_names, header_values), max_size=5))
    body = draw(st.binary(max_size=600))
    head = b"HTTP/1.1 %d Whatever\r\n" % status + b"".join(b"%s: %s\r\n" % h for h in headers)
    if framing == "content-length":
        raw = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    elif framing == "chunked":
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
        parts = [body[a:b] for a, b in itertools.pairwise([0, *cuts, len(body)])]
        raw = head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(parts)
    else:
        raw = head + b"\r\n" + body
    return raw, status, headers, body, framing


def pieces_of(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    return [raw[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers(), cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_any_answer_in_any_pieces_reads_back_as_sent(
    answer: tuple[bytes, int, list[tuple[bytes, bytes]], bytes, str], cuts: list[int]
) -> None:
    raw, status, headers, body, framing = answer
    read = run(pieces_of(raw, cuts), then_close=framing == "until-close")
    assert read.error is None
    assert (read.status, read.body, read.whole) == (status, body, True)
    assert read.headers[: len(headers)] == headers
    assert read.reusable is (framing != "until-close")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=answers(),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.binary(min_size=1, max_size=3)), max_size=4),
    cut_at=st.none() | st.integers(0, 2000),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_any_damaged_answer_reads_whole_or_ends_in_an_endpoint_error(
    answer: tuple[bytes, int, list[tuple[bytes, bytes]], bytes, str],
    flips: list[tuple[int, bytes]],
    cut_at: int | None,
    cuts: list[int],
) -> None:
    """Bytes overwritten and the answer cut anywhere, then the server closes: the exchange
    ends (never hangs), either with a whole answer or with BadAnswer (no head) or BrokeOff
    (after the head), and the connection is not reused after an error."""
    raw = bytearray(answer[0])
    for at, junk in flips:
        raw[min(at, len(raw)) : min(at, len(raw)) + len(junk)] = junk
    damaged = bytes(raw[:cut_at] if cut_at is not None else raw)
    read = run(pieces_of(damaged, cuts))
    if read.error is None:
        assert read.whole and read.status is not None
    elif read.status is None:
        assert isinstance(read.error, BadAnswer)
    else:
        assert isinstance(read.error, BrokeOff)
    if read.error is not None:
        assert read.reusable is False
