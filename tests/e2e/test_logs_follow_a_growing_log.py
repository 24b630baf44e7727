"""``nodeau logs NAME -f`` follows a model server's log as ``tail -f`` does, through the
installed command: its last lines, then each line as it is written (a line written in
pieces comes whole, a log cut short is read again from its start), until Ctrl-C ends it
quietly with exit 0. ``--json`` gives the same lines as JSON."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.real.cli import Cli

HANG_GUARD_S = 60.0  # only so a broken follow fails instead of hanging the suite


class Following:
    """A running ``nodeau logs ... -f`` whose stdout lines are read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_lines(self, n: int) -> list[str]:
        return [self.lines.get(timeout=HANG_GUARD_S) for _ in range(n)]

    def interrupt(self) -> tuple[int, str, str]:
        """Ctrl-C: its exit code, what else it printed, and its stderr."""
        self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=HANG_GUARD_S)
        rest: list[str] = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return self.process.returncode, "\n".join(rest), err

    def end(self) -> None:
        """Killed if still running, its pipes closed once their reader is done."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=HANG_GUARD_S)  # it ends at the pipe's end
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    log = tmp_path / "home" / "logs" / "tiny.log"
    log.parent.mkdir(parents=True)
    log.write_text("--- nodeau: started llama-server\nline one\nline two\n")
    return tmp_path / "home"


@pytest.fixture
def follow(home: Path) -> Iterator[Following]:
    started = Following(Cli(home).start("logs", "tiny", "-f", "--lines", "2"))
    yield started
    started.end()


def append(home: Path, text: str) -> None:
    with (home / "logs" / "tiny.log").open("a") as log:
        log.write(text)


def test_the_last_lines_then_each_line_as_it_is_written(home: Path, follow: Following) -> None:
    assert follow.next_lines(2) == ["line one", "line two"]
    append(home, "line three\n")
    assert follow.next_lines(1) == ["line three"]
    append(home, "half a li")
    append(home, "ne, then whole\nand another\n")
    assert follow.next_lines(2) == ["half a line, then whole", "and another"]
    code, rest, err = follow.interrupt()
    assert (code, rest, err) == (0, "", "")


def test_a_log_cut_short_is_read_again_from_its_start(home: Path, follow: Following) -> None:
    assert follow.next_lines(2) == ["line one", "line two"]
    (home / "logs" / "tiny.log").write_text("restarted\n")
    assert follow.next_lines(1) == ["restarted"]
    assert follow.interrupt()[0] == 0


def test_follow_as_json_is_one_object_a_line(home: Path) -> None:
    following = Following(Cli(home).start("logs", "tiny", "--follow", "--json", "--lines", "1"))
    try:
        assert [json.loads(x) for x in following.next_lines(1)] == [
            {"name": "tiny", "line": "line two"}
        ]
        append(home, "more\n")
        assert json.loads(following.next_lines(1)[0]) == {"name": "tiny", "line": "more"}
        assert following.interrupt() == (0, "", "")
    finally:
        following.end()


def test_logs_as_json_has_the_name_and_the_lines(home: Path) -> None:
    assert Cli(home).json("logs", "tiny", "--lines", "2") == {
        "name": "tiny",
        "lines": ["line one", "line two"],
    }


def test_following_an_unknown_workload_is_one_line_and_exit_1(home: Path) -> None:
    done = Cli(home)("logs", "nosuch", "-f")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "nodeau: no workload called 'nosuch'; nodeau ps lists them\n"
