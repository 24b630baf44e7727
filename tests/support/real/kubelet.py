"""What a kubelet does for the Pods KWOK runs, when their containers run here instead.

``ended`` stops a process as a kubelet does (SIGTERM, grace, SIGKILL); ``beside`` runs a watch
loop on a thread and re-raises its error in the test; ``running_pods`` is that loop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

GRACE_S = 30.0  # a Pod's terminationGracePeriodSeconds by default

T = TypeVar("T")


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


@contextmanager
def running_pods(
    pods: Callable[[], Iterable[Any]],
    start: Callable[[Any], T],
    end: Callable[[T], None],
    tend: Callable[[T], None] = lambda _: None,
    every_s: float = 0.2,
) -> Iterator[dict[str, T]]:
    """For each Pod ``pods()`` lists that runs (KWOK says so) and is not being deleted:
    ``start(pod)`` once, ``tend`` it at every look, ``end`` it once the Pod goes, and end
    every one left when the block ends. Yields what runs, by Pod UID."""
    running: dict[str, T] = {}

    def watch(stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                now = {p.metadata.uid: p for p in pods() if p.metadata.deletion_timestamp is None}
                for uid in [u for u in running if u not in now]:
                    end(running.pop(uid))
                for uid, pod in now.items():
                    if uid not in running and pod.status.phase == "Running":
                        running[uid] = start(pod)
                for each in running.values():
                    tend(each)
                time.sleep(every_s)
        finally:
            for each in running.values():
                end(each)

    with beside(watch):
        yield running
