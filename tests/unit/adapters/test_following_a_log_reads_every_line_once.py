"""``follow_log`` gives each whole line once: the last lines first, then what is written,
through a log that is not there yet, cut short, or replaced by a new file. Its ``sleep``
is where the test writes, so nothing here waits on a clock."""

from __future__ import annotations

from collections.abc import Callable, Generator
from itertools import islice
from pathlib import Path

from nodeau.adapters.server_logs import follow_log


def writer(steps: list[Callable[[], None]]) -> Callable[[float], None]:
    """A ``sleep`` that does the next step each time the follower waits."""
    pending = iter(steps)

    def sleep(_seconds: float) -> None:
        next(pending, lambda: None)()

    return sleep


def taken(lines: Generator[str, None, None], n: int) -> list[str]:
    got = list(islice(lines, n))
    lines.close()
    return got


def test_the_last_lines_then_what_is_appended_in_pieces(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\nb\nc\npartial")

    def more() -> None:
        with log.open("ab") as f:
            f.write(b" line\nd\r\n")

    lines = follow_log(log, 2, sleep=writer([more]))
    assert taken(lines, 4) == ["b", "c", "partial line", "d"]


def test_a_log_not_there_yet_is_waited_for(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    lines = follow_log(log, 5, sleep=writer([lambda: None, lambda: log.write_bytes(b"first\n")]))
    assert taken(lines, 1) == ["first"]


def test_a_log_cut_short_or_replaced_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"old one\nold two\n")

    def replace() -> None:
        new = tmp_path / "new.log"
        new.write_bytes(b"new file\n")
        new.replace(log)

    steps = [lambda: log.write_bytes(b"cut\n"), replace]
    lines = follow_log(log, 1, sleep=writer(steps))
    assert taken(lines, 3) == ["old two", "cut", "new file"]


def test_no_last_lines_asked_starts_at_the_end(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"before\n")

    def more() -> None:
        with log.open("ab") as f:
            f.write(b"after\n")

    assert taken(follow_log(log, 0, sleep=writer([more])), 1) == ["after"]
