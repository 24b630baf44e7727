"""Port of the model runtime: a real model server process serving one artifact."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from attrs import frozen

from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.records import RunningServer, Starter
from nodeau.domain.workloads import ServerExit
from nodeau.ports.errors import NodeauError

__all__ = [
    "FitEstimate",
    "FitEstimates",
    "MemoryUse",
    "ModelRuntime",
    "RunningServer",
    "RuntimeFailure",
    "ServerLogs",
    "ServerSpec",
    "ServerWatch",
]


class RuntimeFailure(NodeauError):
    """The model server could not be started, reached or stopped; one line for a person."""


@frozen(kw_only=True)
class ServerSpec:
    """What to serve and how: the verified file, the admitted configuration, the card."""

    name: str  # the workload's name; the model id the server answers to
    model_path: Path
    config: RuntimeConfig
    gpu_uuid: str | None  # None: no card (simulated hardware), the model runs on the CPU
    log_path: Path
    log_buffers: bool = False  # its log also reports every buffer it allocates (qualification)
    # a model split across cards: each card in slot order with its whole slot count, the
    # first being ``gpu_uuid``; empty: one card, or none
    split: tuple[tuple[str, int], ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.split:
            return
        if len(self.split) < 2 or self.split[0][0] != self.gpu_uuid:
            raise ValueError(f"a split of {self.name} is two cards or more, from {self.gpu_uuid}")
        if min(count for _, count in self.split) <= 0:
            raise ValueError(f"every card of {self.name}'s split takes a slot")

    @property
    def visible_cards(self) -> str | None:
        """The cards the server may see, in slot order, comma-separated (None: none)."""
        return ",".join(uuid for uuid, _ in self.split) if self.split else self.gpu_uuid


@frozen(kw_only=True)
class MemoryUse:
    """What the server holds now, and how it was read ("nvml" or "rss, simulated hardware")."""

    bytes: int
    source: str


class ModelRuntime(Protocol):
    """Starts and stops model servers that outlive the command that started them."""

    def start(
        self,
        spec: ServerSpec,
        ready_timeout_s: float,
        *,
        launched: Callable[[RunningServer], None] | None = None,
    ) -> RunningServer:
        """Start the server on a free 127.0.0.1 port and wait until it answers, at most
        ``ready_timeout_s``; on failure the process is gone and RuntimeFailure says why
        (with the last lines of its log). ``launched`` is told of each process launched
        before its readiness is awaited (an exception out of it ends that process)."""
        ...

    def alive(self, server: RunningServer) -> bool:
        """Whether that process is still this server (a reused pid is not)."""
        ...

    def stop(self, server: RunningServer, grace_s: float) -> None:
        """Stop it cleanly: SIGTERM, then SIGKILL after ``grace_s``. A gone server is fine."""
        ...

    def found(self, name: str, model_path: str) -> tuple[RunningServer, ...]:
        """The model servers running now for workload ``name`` of ``model_path``, whether a
        record names them or not (what an interrupted start left)."""
        ...

    def memory(self, server: RunningServer) -> MemoryUse | None:
        """Its memory now, labelled by how it was read; None when it is gone."""
        ...


class Stopper(Protocol):
    """Stops a recorded model server (any runtime's: its record names the process), and
    finds those a record may not name."""

    def stop(self, server: RunningServer, grace_s: float) -> None: ...

    def found(self, name: str, model_path: str) -> tuple[RunningServer, ...]:
        """The model servers running now for workload ``name`` of ``model_path``."""
        ...


class ServerWatch(Protocol):
    """What ``ps`` asks of this home's processes, whichever runtime started them: no model
    server need be installed, and none is started, to ask."""

    def any_under(self, models_root: Path) -> bool:
        """Whether any model server of a model under ``models_root`` runs now."""
        ...

    def starter_alive(self, starter: Starter) -> bool:
        """Whether the process starting a model server still runs (the same process)."""
        ...

    def alive(self, server: RunningServer) -> bool:
        """Whether ``server``'s process still runs as it was started."""
        ...

    def exit_of(self, server: RunningServer, log_path: Path) -> ServerExit | None:
        """How ``server`` ended, as its reaper kept it beside ``log_path`` (None: unknown)."""
        ...


class HomeServers(Stopper, Protocol):
    """A ``Stopper`` that also finds every model server of one home."""

    def under(self, models_root: Path) -> tuple[tuple[str, RunningServer], ...]:
        """Every model server running now of a model under ``models_root`` (this home's),
        with the workload name it serves."""
        ...


class Relaunch(Protocol):
    """How a recorded server is started again."""

    @property
    def runtime(self) -> ModelRuntime: ...

    @property
    def on_card(self) -> bool:
        """Whether it ran on its card (else on the CPU: simulated hardware)."""
        ...


class ServerProcesses(Protocol):
    """What a supervisor asks of model server processes."""

    def alive(self, server: RunningServer) -> bool:
        """Whether it still runs as it was started."""
        ...

    def exit_of(
        self, server: RunningServer, log_path: Path, *, starting: bool = False
    ) -> ServerExit | None:
        """How it ended, when that was kept (None: unknown)."""
        ...

    def relaunch(self, server: RunningServer) -> Relaunch | None:
        """How to start it again (None: its command line is no model server known here)."""
        ...

    def stop(self, server: RunningServer, grace_s: float) -> None: ...


class ServerLogs(Protocol):
    """A model server's log as a person reads it (``nodeau logs``)."""

    def tail(self, path: Path, lines: int) -> tuple[str, ...]:
        """Its last ``lines`` lines; () when there is none."""
        ...

    def follow(self, path: Path, lines: int) -> Iterator[str]:
        """Its last ``lines`` lines, then each line as it is written, until the reader
        stops."""
        ...


@frozen(kw_only=True)
class FitEstimate:
    """What the runtime's own fit tool says a configuration uses: bytes (whole MiB), where
    ("host": the CPU's memory, "device": the cards'), and the tool that said it."""

    bytes: int
    where: str
    tool: str


class FitEstimates(Protocol):
    """The runtime's own memory estimate of a configuration: a second opinion, never the
    admission figure."""

    def estimate(self, server: Path, spec: ServerSpec) -> FitEstimate | str:
        """What the fit tool beside ``server`` says ``spec`` uses, or why it said nothing
        (one line)."""
        ...
