"""The endpoint's and the dashboard's log handler (``log_bound.BoundedStreamHandler``), with
a clock the test moves: a flood of one kind keeps its first few records a minute and says
how many it left out; other kinds still get in; every record and every minute is bounded."""

from __future__ import annotations

import io
import logging

from nodeau.apps.endpoint.log_bound import (
    BYTES_PER_WINDOW,
    MAX_RECORD_CHARS,
    PER_KIND,
    PER_WINDOW,
    WINDOW_S,
    BoundedStreamHandler,
)
from tests.support.clock import Clock


def record(msg: str, *args: object, name: str = "uvicorn.error") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)


def handler() -> tuple[BoundedStreamHandler, io.StringIO, Clock[float]]:
    out, clock = io.StringIO(), Clock(1000.0)
    h = BoundedStreamHandler(out, clock=clock)
    h.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    return h, out, clock


def test_a_flood_of_one_kind_keeps_a_few_a_minute_and_counts_the_rest() -> None:
    h, out, clock = handler()
    for i in range(10_000):
        h.handle(record("A request that is not HTTP/1.1 was refused (400): %s", i))
        clock.now += 0.001  # ten seconds in all: one window
    kept = out.getvalue().splitlines()
    assert len(kept) == PER_KIND
    clock.now += WINDOW_S
    h.handle(record("A request that is not HTTP/1.1 was refused (400): %s", "later"))
    lines = out.getvalue().splitlines()
    assert lines[PER_KIND] == (
        f"WARNING {10_000 - PER_KIND} log records were left out: this log keeps at most "
        f"{PER_KIND} of one kind, {PER_WINDOW} in all and {BYTES_PER_WINDOW // 1024} KiB a minute"
    )
    assert lines[PER_KIND + 1].endswith("(400): later")


def test_other_kinds_still_get_in_during_a_flood() -> None:
    h, out, _ = handler()
    for i in range(1000):
        h.handle(record("flood %s", i))
    h.handle(record("supervising the model server failed", name="nodeau.endpoint"))
    assert out.getvalue().splitlines()[-1] == "WARNING supervising the model server failed"


def test_a_minute_holds_at_most_its_records_and_bytes_whatever_the_kinds() -> None:
    h, out, _ = handler()
    for i in range(1000):
        h.handle(record(f"kind {i} " + "x" * 300))  # each its own kind
    text = out.getvalue()
    assert len(text.splitlines()) <= PER_WINDOW
    assert len(text) <= BYTES_PER_WINDOW


def test_a_long_record_keeps_its_start_and_its_end() -> None:
    h, out, _ = handler()
    h.handle(record("start " + "x" * 100_000 + " end"))
    text = out.getvalue()
    assert len(text) <= MAX_RECORD_CHARS + 100
    assert text.startswith("WARNING start x")
    assert text.rstrip().endswith("x end")
    assert "characters left out ...]" in text


def test_what_was_left_out_is_said_at_close() -> None:
    h, out, _ = handler()
    for _ in range(PER_KIND + 3):
        h.handle(record("the same"))
    h.close()
    assert out.getvalue().splitlines()[-1].startswith("WARNING 3 log records were left out")
