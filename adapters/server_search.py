"""Finding model servers by their command lines, whether a record names them or not.

Each model server Nodeau starts names its workload (``--alias``, or ``--model_alias`` for
llama-cpp-python's) and its model file (``--model``), which lies under one home's models
folder: that is how a home's servers are found when its state is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from nodeau.adapters import processes

if TYPE_CHECKING:  # ps asks first whether any server runs: it imports no record to ask it
    from nodeau.domain.records import RunningServer, Starter
    from nodeau.domain.workloads import ServerExit


def servers_serving(
    model_matches: Callable[[str], bool],
) -> tuple[tuple[str, processes.OurProcess], ...]:
    """Every model server of this user running now whose model file ``model_matches``,
    with the workload name it serves."""

    def matches(argv: tuple[str, ...]) -> bool:
        model = value_of(argv, "--model")
        return alias_of(argv) is not None and model is not None and model_matches(model)

    return tuple((alias_of(p.command or ()) or "", p) for p in processes.running_with(matches))


def under(models_root: Path) -> tuple[tuple[str, processes.OurProcess], ...]:
    """Every model server running now of a model under ``models_root`` (one home's)."""
    root = str(models_root).rstrip("/") + "/"
    return servers_serving(lambda model: model.startswith(root))


def value_of(args: tuple[str, ...], flag: str) -> str | None:
    """The value after ``flag`` in a command line, if any."""
    at = args.index(flag) if flag in args else -1
    return args[at + 1] if 0 <= at < len(args) - 1 else None


def alias_of(argv: tuple[str, ...]) -> str | None:
    """The workload name a model server's command line serves."""
    return value_of(argv, "--alias") or value_of(argv, "--model_alias")


def port_of(argv: tuple[str, ...]) -> int:
    """The port a model server's command line listens on (0 when it names none)."""
    port = value_of(argv, "--port") or ""
    return int(port) if port.isdigit() else 0


class HomeServerWatch:
    """``ServerWatch`` through this machine's process table and the reapers' exit files."""

    def any_under(self, models_root: Path) -> bool:
        return bool(under(models_root))

    def starter_alive(self, starter: Starter) -> bool:
        return processes.alive(processes.OurProcess(pid=starter.pid, created_at=starter.created_at))

    def alive(self, server: RunningServer) -> bool:
        from nodeau.adapters.model_server_process import server_alive

        return server_alive(server)

    def exit_of(self, server: RunningServer, log_path: Path) -> ServerExit | None:
        from nodeau.adapters.model_server_process import server_exit

        return server_exit(server, log_path)
