"""What each Pod's model server holds on its card, sampled between the agent's rounds.

Why it is so: docs/adr/decisions/apps-agent.md (memory.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from nodeau.domain.hardware import PodMemory, PodWatch, after_sample
from nodeau.ports.errors import NodeauError
from nodeau.ports.hardware import CardProcesses, ProcessPods

SAMPLE_S = 0.25
KEEP_FOR = timedelta(minutes=5)


class PodMemoryWatch:
    """Samples the cards' processes per Pod until stopped; ``memory`` is what it keeps."""

    def __init__(
        self,
        *,
        processes: CardProcesses,
        pods: ProcessPods,
        clock: Callable[[], datetime],
        interval_s: float = SAMPLE_S,
        keep_for: timedelta = KEEP_FOR,
    ) -> None:
        self._processes = processes
        self._pods = pods
        self._clock = clock
        self._interval_s = interval_s
        self._keep_for = keep_for
        self._watch = PodWatch()
        self._problem: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Read the cards' processes once and keep what each Pod holds."""
        try:
            listed = self._processes.processes()
        except NodeauError as exc:
            with self._lock:
                self._problem = f"cannot read the model servers' memory: {exc.one_line()}"
            return
        owned = [(pod, p) for p in listed if (pod := self._pods.pod_of(p.pid)) is not None]
        at = self._clock()
        with self._lock:
            self._watch = after_sample(self._watch, owned, at, self._keep_for)
            self._problem = None

    def memory(self) -> tuple[PodMemory, ...]:
        """Each Pod's memory per card, as the samples so far saw it."""
        with self._lock:
            return self._watch.memory()

    def problem(self) -> str | None:
        """Why the last sample read nothing, or None."""
        with self._lock:
            return self._problem

    def start(self) -> None:
        """Sample now (the first round reports it), then every ``interval_s`` on a thread
        of its own."""
        self.sample()
        self._thread = threading.Thread(target=self._run, name="pod-memory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()
