"""What a kubelet does for the Pods KWOK runs, when their containers run here instead.

``ended`` stops a container's process as a kubelet does: SIGTERM, a grace period, SIGKILL.
``beside`` runs a watch loop on a thread for a with-block, and raises what it raised there,
with its traceback, instead of as a warning in whichever test runs next.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

GRACE_S = 30.0  # a Pod's terminationGracePeriodSeconds by default


def ended(process: subprocess.Popen[Any], grace_s: float = GRACE_S) -> int:
    """Stop ``process`` (a paused one too) and reap it; returns its exit status."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGCONT)  # a test may have paused it
        process.terminate()
        try:
            return process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


@contextmanager
def beside(watch: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run ``watch(stop)`` on a thread until the block ends, then set ``stop`` and wait for
    it; what it raised is raised here."""
    stop = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            watch(stop)
        except BaseException as exc:  # raised again in the test's thread
            raised.append(exc)

    thread = threading.Thread(target=run, name="kubelet", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2 * GRACE_S + 30)
        if raised:
            raise raised[0]
        assert not thread.is_alive(), "the kubelet stand-in did not stop"
