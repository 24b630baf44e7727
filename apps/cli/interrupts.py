"""Ending a command by signal as by Ctrl-C: SIGTERM and SIGHUP raise KeyboardInterrupt.

A command that starts something (``run``, ``batch submit``) cleans up on the way out of a
KeyboardInterrupt; without this, SIGTERM or a closed terminal would end it at once, with
nothing cleaned up.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within it, SIGTERM and SIGHUP raise KeyboardInterrupt (the handlers before are
    restored after)."""
    before = {s: signal.signal(s, _interrupt) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
