"""An in-memory ``ModelRuntime``, checked by the same contract suite as the real servers
(tests/contract/test_model_runtime.py), for fast use-case tests of the planes."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from nodeau.domain.model_server import CUDA, ServerAbilities, ServerDevice
from nodeau.ports.runtime import MemoryUse, RunningServer, RuntimeFailure, ServerSpec

SOURCE = "fake: bytes of the model file"
# what the fake server says it can use: a CUDA build that sees a card, or the CPU only
SEES_A_CARD = ServerAbilities(
    server="fake-server",
    program="fake-server",
    version="1.0",
    backends=(CUDA,),
    devices=(ServerDevice(name="CUDA0", description="Fake card", total_bytes=80 << 30),),
)
CPU_ONLY = ServerAbilities(server="fake-server", program="fake-server", version="1.0")


class FakeModelRuntime:
    """Starts nothing: a started server is a record that is alive until stopped."""

    def __init__(
        self, clock: Callable[[], datetime], abilities: ServerAbilities = SEES_A_CARD
    ) -> None:
        """``abilities``: what this server says it can use (``MachineParts.server``)."""
        self._clock = clock
        self.abilities = abilities
        self._pids = itertools.count(10_000)
        self._ports = itertools.count(30_000)
        self._alive: dict[int, int] = {}  # pid -> bytes held
        self.started: list[ServerSpec] = []

    def start(
        self,
        spec: ServerSpec,
        ready_timeout_s: float,
        *,
        launched: Callable[[RunningServer], None] | None = None,
    ) -> RunningServer:
        try:
            size = spec.model_path.stat().st_size
        except OSError as exc:
            raise RuntimeFailure(f"{spec.name}: {spec.model_path}: {exc.strerror}") from exc
        pid, port = next(self._pids), next(self._ports)
        self._alive[pid] = size
        self.started.append(spec)
        server = RunningServer(
            pid=pid,
            port=port,
            started_at=self._clock(),
            command=("fake-server", "--model", str(spec.model_path), "--port", str(port)),
        )
        if launched is not None:
            try:
                launched(server)
            except BaseException:
                self._alive.pop(pid, None)
                raise
        return server

    def alive(self, server: RunningServer) -> bool:
        return server.pid in self._alive

    def found(self, name: str, model_path: str) -> tuple[RunningServer, ...]:
        return ()  # every server it starts is recorded before it could be interrupted

    def under(self, models_root: Path) -> tuple[tuple[str, RunningServer], ...]:
        return ()  # nor can its records be lost

    def stop(self, server: RunningServer, grace_s: float) -> None:
        self._alive.pop(server.pid, None)

    def memory(self, server: RunningServer) -> MemoryUse | None:
        held = self._alive.get(server.pid)
        return None if held is None else MemoryUse(bytes=held, source=SOURCE)
