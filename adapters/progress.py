"""Showing a fetch's progress: a rich bar on a terminal, plain lines in a log.

Why it is so: docs/adr/decisions/adapters.md (progress.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from nodeau.ports.models import FetchProgress

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def size_text(count: int | float) -> str:
    """Bytes in binary units with one decimal: ``512.0 MiB``; under 1 KiB as ``N B``."""
    if count < 1024:
        return f"{int(count)} B"
    value = float(count)
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            break
    return f"{value:.1f} {unit}"


def duration_text(seconds: float) -> str:
    """A duration a person reads at a glance: ``50s``, ``3m20s``, ``1h05m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class PlainLines:
    """A :data:`~nodeau.ports.models.FetchProgress` writing one plain line now and then."""

    def __init__(
        self,
        name: str,
        write: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = 10.0,
    ) -> None:
        self._name = name
        self._write = write
        self._clock = clock
        self._every_s = every_s
        self._start: tuple[float, int] | None = None  # (moment, bytes present) of the first call
        self._last_line_at = 0.0
        self._last_tenth = -1
        self._finished = False

    def __call__(self, present: int, expected: int) -> None:
        now = self._clock()
        tenth = min(10, present * 10 // expected) if expected > 0 else 10
        if self._start is None:
            self._start = (now, present)
        elif self._finished or (
            tenth <= self._last_tenth and now - self._last_line_at < self._every_s
        ):
            return
        self._last_line_at, self._last_tenth = now, tenth
        self._finished = present >= expected
        self._write(self.line(present, expected, now))

    def line(self, present: int, expected: int, now: float) -> str:
        """The line for ``present`` of ``expected`` bytes at moment ``now``."""
        assert self._start is not None
        started_at, started_with = self._start
        percent = 100 if expected <= 0 else min(100, present * 100 // expected)
        text = f"{self._name}: {size_text(present)} of {size_text(expected)} ({percent}%)"
        elapsed = now - started_at
        arrived = present - started_with
        if elapsed <= 0 or arrived <= 0:
            return text
        rate = arrived / elapsed
        text += f", {size_text(rate)}/s"
        if present >= expected:
            return f"{text}, done in {duration_text(elapsed)}"
        return f"{text}, ETA {duration_text((expected - present) / rate)}"


class _Bar:
    """A rich progress bar for one file, its task created at the first call."""

    def __init__(self, progress: Progress, name: str) -> None:
        self._progress = progress
        self._name = name
        self._task: TaskID | None = None

    def __call__(self, present: int, expected: int) -> None:
        if self._task is None:
            # starting at the kept prefix keeps it out of the measured rate
            self._task = self._progress.add_task(self._name, total=expected, completed=present)
        else:
            self._progress.update(self._task, completed=present, total=expected)


@contextmanager
def fetch_progress(
    name: str, *, stream: TextIO | None = None, terminal: bool | None = None
) -> Iterator[FetchProgress]:
    """A progress callback for fetching ``name``, shown on ``stream`` (stderr by default).

    A bar when the stream is a terminal, plain lines otherwise; ``terminal``
    overrides the detection. The bar is taken down when the block ends.
    """
    out = stream if stream is not None else sys.stderr
    console = Console(file=out, force_terminal=terminal)
    if not console.is_terminal:
        yield PlainLines(name, lambda line: print(line, file=out, flush=True))
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        yield _Bar(progress, name)


class PlainSteps:
    """A :data:`~nodeau.ports.server_install.BuildProgress` writing plain lines: one when a
    step begins, then one at each tenth of a step whose whole is known, with the time the
    step has taken."""

    def __init__(
        self, write: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._write = write
        self._clock = clock
        self._step: str | None = None
        self._began = 0.0
        self._tenth = -1
        self._said_at = 0.0

    def __call__(self, step: str, done: float, total: float | None) -> None:
        now = self._clock()
        if step != self._step:
            self._step, self._began, self._tenth = step, now, -1
            self._write(f"{step} ...")
        if not total:
            return
        tenth = min(10, int(done * 10 // total))
        if tenth > self._tenth and (tenth == 10 or now - self._said_at >= 5.0):
            self._tenth, self._said_at = tenth, now
            shown = size_text(done) if total > 1000 else f"{int(done * 100 // total)}%"
            whole = f" of {size_text(total)}" if total > 1000 else ""
            self._write(f"{step}: {shown}{whole}, {duration_text(now - self._began)}")


class _StepBars:
    """Rich bars, one per step: a bar where the step's whole is known, a count otherwise."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, step: str, done: float, total: float | None) -> None:
        task = self._tasks.get(step)
        if task is None:
            for earlier in self._tasks.values():  # a new step: the earlier ones are done
                whole = self._progress.tasks[earlier].total
                self._progress.update(earlier, completed=whole if whole else 1, total=whole or 1)
            self._tasks[step] = self._progress.add_task(step, total=total, completed=int(done))
        else:
            self._progress.update(task, completed=done, total=total)


@contextmanager
def build_progress(
    *, stream: TextIO | None = None, terminal: bool | None = None
) -> Iterator[Callable[[str, float, float | None], None]]:
    """A progress callback for an install's steps, shown on ``stream`` (stderr by default):
    rich bars on a terminal, plain lines elsewhere (a log, CI)."""
    out = stream if stream is not None else sys.stderr
    console = Console(file=out, force_terminal=terminal)
    if not console.is_terminal:
        yield PlainSteps(lambda line: print(line, file=out, flush=True))
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        yield _StepBars(progress)
