"""An install's progress where no terminal shows bars: a line per step, then its tenths."""

from __future__ import annotations

import io

from nodeau.adapters.progress import PlainSteps, build_progress
from tests.support.clock import Clock


def test_a_step_is_said_when_it_begins_and_at_each_tenth_at_most_every_five_seconds() -> None:
    lines: list[str] = []
    clock = Clock(0.0)
    steps = PlainSteps(lines.append, clock=clock)
    steps("configuring (cmake)", 0, None)
    for percent in range(0, 101, 5):
        clock.now += 3.0
        steps("compiling", percent, 100)
    assert lines[:4] == [
        "configuring (cmake) ...",
        "compiling ...",
        "compiling: 5%, 3s",  # a line per tenth, five seconds apart at least
        "compiling: 15%, 9s",
    ]
    assert lines[-1] == "compiling: 100%, 1m00s"  # the end is always said
    assert len(lines) == 2 + 11


def test_a_download_is_said_in_bytes() -> None:
    lines: list[str] = []
    clock = Clock(0.0)
    steps = PlainSteps(lines.append, clock=clock)
    steps("fetching x.whl", 0, 4 << 20)
    clock.now = 6.0
    steps("fetching x.whl", 4 << 20, 4 << 20)
    assert lines == ["fetching x.whl ...", "fetching x.whl: 4.0 MiB of 4.0 MiB, 6s"]


def test_no_terminal_means_plain_lines_on_the_stream() -> None:
    out = io.StringIO()
    with build_progress(stream=out, terminal=False) as progress:
        progress("unpacking the llama.cpp sources", 0, None)
    assert out.getvalue() == "unpacking the llama.cpp sources ...\n"
