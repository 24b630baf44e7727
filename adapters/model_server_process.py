"""A model server as a real process: what every model server runtime shares.

Why it is so: docs/adr/decisions/adapters.md (model_server_process.py).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from nodeau.adapters import processes, server_search
from nodeau.adapters.detached import read_status, reaped_launcher_argv
from nodeau.domain.workloads import ServerExit
from nodeau.ports.runtime import MemoryUse, RunningServer, RuntimeFailure, ServerSpec

if TYPE_CHECKING:
    from nodeau.adapters.llama_server import LocalRelaunch

HOST = "127.0.0.1"
SOURCE_NVML = "nvml"
SOURCE_RSS_SIMULATED = "rss, simulated hardware (CPU)"
SOURCE_RSS_UNLISTED = "rss (NVML lists no memory for this process)"

_PORT_ATTEMPTS = 3
_POLL_S = 0.05
_KILL_WAIT_S = 5.0
_LAUNCH_TIMEOUT_S = 30.0
_EXCERPT_CHARS = 800
_TAIL_BYTES = 64 * 1024
_STATUS_WAIT_S = 0.5  # a reaper writes its status within milliseconds of the end
_LOG_LINE = re.compile(r"^\d+\.\d+\.\d+\.\d+ ([A-Z]) (.*)$")


def free_port() -> int:
    """A port free on 127.0.0.1 right now (another process may take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def log_excerpt(path: Path, offset: int = 0) -> str:
    """The telling lines of the log written since ``offset``, as one line.

    llama-server tags lines with a level; other lines count as errors when they
    say "error". Where there are errors, the first two (the cause) and the last
    three (the outcome) are kept, else the last five lines.
    """
    try:
        with path.open("rb") as f:
            f.seek(max(offset, f.seek(0, os.SEEK_END) - _TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(log {path} unreadable: {exc.strerror or exc})"
    lines: list[tuple[str | None, str]] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or line.startswith("--- nodeau:"):
            continue
        match = _LOG_LINE.match(line)
        lines.append((match[1], match[2]) if match else (None, line))
    errors = [t for level, t in lines if level == "E" or (level is None and "error" in t.lower())]
    chosen = list(dict.fromkeys(errors[:2] + errors[-3:])) if errors else [t for _, t in lines[-5:]]
    excerpt = " | ".join(chosen) or "(the log is empty)"
    return excerpt if len(excerpt) <= _EXCERPT_CHARS else excerpt[: _EXCERPT_CHARS - 3] + "..."


def exit_path(log_path: Path) -> Path:
    """Where the reaper of a server logging to ``log_path`` writes how it ended."""
    return log_path.with_name(log_path.name + ".exit.json")


def server_exit(
    server: RunningServer, log_path: Path, *, starting: bool = False, wait_s: float = 0.0
) -> ServerExit | None:
    """How ``server`` ended, as its reaper wrote it beside ``log_path`` (waiting up to
    ``wait_s`` for the file); None when no status names it (its reaper was gone too, or
    it was started before reapers were)."""
    path = exit_path(log_path)
    deadline = time.monotonic() + wait_s
    while (end := read_status(path, server.pid)) is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    if end is None:
        return None
    at = datetime.fromtimestamp(end.at, UTC)
    if at < server.started_at - timedelta(seconds=processes.SAME_START_S):
        return None  # about an earlier process that had the same pid
    if end.signal is not None:
        return ServerExit.killed(end.signal, end.signal_name, at, starting=starting)
    if end.code is not None:
        return ServerExit.exited(end.code, at, starting=starting)
    return None


def found_servers(name: str, model_path: str) -> tuple[RunningServer, ...]:
    """The model servers running now for workload ``name`` of ``model_path`` (any
    runtime's), whether a record names them or not: what an interrupted start left."""
    found = server_search.servers_serving(lambda model: model == model_path)
    return tuple(_as_server(p) for alias, p in found if alias == name)


def servers_under(models_root: Path) -> tuple[tuple[str, RunningServer], ...]:
    """Every model server running now of a model file under ``models_root`` (one home's),
    with the workload name it serves, whether a record names it or not."""
    return tuple((alias, _as_server(p)) for alias, p in server_search.under(models_root))


def _as_server(found: processes.OurProcess) -> RunningServer:
    command = found.command or ()
    return RunningServer(
        pid=found.pid,
        port=server_search.port_of(command),
        started_at=datetime.fromtimestamp(found.created_at or 0, UTC),
        command=command,
        created_at=found.created_at,
    )


def server_alive(server: RunningServer) -> bool:
    """Whether ``server``'s process still runs as it was started (any runtime's ``alive``)."""
    return processes.alive(_process(server))


class ServerProcessRuntime(ABC):
    """ModelRuntime for a server started as a detached process; subclasses say how to start it."""

    #: the server's name in messages ("llama-server")
    server_name: str
    #: the GET that answers 200 once the model is loaded and the server listens
    ready_path: str
    #: what the log says when another process took the port first
    bind_failure: str
    #: the environment variable the server reads its API key from
    key_variable: str

    def __init__(
        self,
        *,
        inventory_memory: Callable[[int], int | None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``inventory_memory``: a card's bytes held by a pid (``GpuInventory.process_memory``)
        on a GPU machine; None under simulated hardware. ``environ``: the environment the
        server starts from (default: this process's, read at each start)."""
        self._inventory_memory = inventory_memory
        self._environ = environ

    @abstractmethod
    def check(self, spec: ServerSpec) -> None:
        """Raise RuntimeFailure when ``spec`` cannot be served at all (before any process)."""

    @abstractmethod
    def command(self, spec: ServerSpec, port: int) -> tuple[str, ...]:
        """The exact command line that serves ``spec`` on ``port``."""

    @abstractmethod
    def environment(self, base: Mapping[str, str], spec: ServerSpec) -> dict[str, str]:
        """The server's environment, made from ``base``."""

    def start(
        self,
        spec: ServerSpec,
        ready_timeout_s: float,
        *,
        launched: Callable[[RunningServer], None] | None = None,
    ) -> RunningServer:
        """``ModelRuntime.start``; ``launched`` is told of each process launched, before its
        readiness is awaited."""
        self.check(spec)
        if not spec.model_path.is_file():
            raise RuntimeFailure(f"{spec.model_path}: no such model file")
        deadline = time.monotonic() + ready_timeout_s
        env = self.environment(os.environ if self._environ is None else self._environ, spec)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            port = free_port()
            command = self.command(spec, port)
            offset = _begin_log(spec.log_path, command)
            key = secrets.token_urlsafe(32)
            pid = self._launch(command, spec.log_path, env | {self.key_variable: key})
            server = RunningServer(
                pid=pid,
                port=port,
                started_at=datetime.now(UTC),
                command=command,
                created_at=processes.start_time(pid),
                api_key=key,
            )
            if launched is not None:
                try:
                    launched(server)
                except BaseException:
                    self._kill(server)  # nobody knows of it: it must not outlive this start
                    raise
            outcome = self._wait_ready(server, deadline)
            if outcome == "ready":
                return server
            self._kill(server)
            excerpt = log_excerpt(spec.log_path, offset)
            if outcome == "exited" and self.bind_failure in excerpt and attempt < _PORT_ATTEMPTS:
                continue  # another process took the port between our probe and its bind
            what = (
                "exited while starting"
                if outcome == "exited"
                else f"was not ready within {ready_timeout_s:g} s"
            )
            raise RuntimeFailure(
                f"{self.server_name} for {spec.name} ({spec.model_path}) {what}: {excerpt}"
                f" (log: {spec.log_path})"
            )
        raise AssertionError("unreachable: the last attempt returns or raises")

    def alive(self, server: RunningServer) -> bool:
        return server_alive(server)

    def found(self, name: str, model_path: str) -> tuple[RunningServer, ...]:
        return found_servers(name, model_path)

    def stop(self, server: RunningServer, grace_s: float) -> None:
        stop_server(server, grace_s, self.server_name)

    def memory(self, server: RunningServer) -> MemoryUse | None:
        if not self.alive(server):
            return None
        if self._inventory_memory is not None:
            held = self._inventory_memory(server.pid)
            if held is not None:
                return MemoryUse(bytes=held, source=SOURCE_NVML)
        rss = processes.rss(_process(server))
        if rss is None:
            return None
        source = SOURCE_RSS_SIMULATED if self._inventory_memory is None else SOURCE_RSS_UNLISTED
        return MemoryUse(bytes=rss, source=source)

    def _launch(self, command: tuple[str, ...], log_path: Path, env: Mapping[str, str]) -> int:
        launcher = reaped_launcher_argv(log_path, exit_path(log_path), command)
        cannot = f"{command[0]}: cannot start {self.server_name}"
        try:
            done = subprocess.run(
                launcher,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_LAUNCH_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeFailure(f"{cannot}: {exc}") from exc
        out = done.stdout.decode("utf-8", "replace").strip()
        if done.returncode != 0 or not out.isdigit():
            said = out.removeprefix("error: ") or done.stderr.decode("utf-8", "replace").strip()
            raise RuntimeFailure(f"{cannot}: {' '.join(said.split())[-_EXCERPT_CHARS:]}")
        return int(out)

    def _wait_ready(self, server: RunningServer, deadline: float) -> str:
        """Poll the readiness GET until it answers 200: "ready", "exited" or "timeout"."""
        import httpx  # here: what only looks at processes (``nodeau ps``) does not load it

        url = f"{server.base_url}{self.ready_path}"
        with httpx.Client(trust_env=False) as client:
            while True:
                if not self.alive(server):
                    return "exited"
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                try:
                    answer = client.get(url, headers=server.auth_headers, timeout=min(1.0, left))
                    if answer.status_code == 200 and (
                        processes.listens(_process(server), HOST, server.port) is not False
                    ):
                        return "ready"  # (a 200 from another process on our port is not)
                except httpx.HTTPError:
                    pass  # not listening yet, or still loading
                time.sleep(max(min(_POLL_S, deadline - time.monotonic()), 0.0))

    def _kill(self, server: RunningServer) -> None:
        try:
            processes.kill(_process(server), group=True, wait_s=_KILL_WAIT_S)
        except processes.ProcessError as exc:
            raise _failure(server, exc, self.server_name) from exc


def stop_server(server: RunningServer, grace_s: float, server_name: str = "model server") -> None:
    """Stop ``server`` through its process group: SIGTERM, then SIGKILL after ``grace_s``.
    A gone server is fine (any runtime's ``stop``)."""
    try:
        processes.terminate(_process(server), grace_s, group=True, kill_wait_s=_KILL_WAIT_S)
    except processes.ProcessError as exc:
        raise _failure(server, exc, server_name) from exc


def _failure(
    server: RunningServer, exc: processes.ProcessError, server_name: str
) -> RuntimeFailure:
    which = f"{server_name} (pid {server.pid}, port {server.port})"
    if isinstance(exc, processes.ProcessDenied):
        return RuntimeFailure(f"{which}: no permission to stop it")
    return RuntimeFailure(f"{which} still runs after SIGKILL")


def _process(server: RunningServer) -> processes.OurProcess:
    """The server's process as recorded (a record without its start time: by its command line)."""
    return processes.OurProcess(
        pid=server.pid, created_at=server.created_at, command=server.command
    )


def _begin_log(path: Path, command: tuple[str, ...]) -> int:
    """Append a header naming this start to the log; return where this start's lines begin."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as log:
            offset = log.tell()
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"--- nodeau: {stamp} {shlex.join(command)}\n".encode())
            return offset
    except OSError as exc:
        raise RuntimeFailure(f"{path}: cannot write the server log: {exc.strerror or exc}") from exc


class LocalServerProcesses:
    """What a supervisor asks of the model server processes on this machine: whether one
    runs, how it ended, how to start it again and how to stop it (any runtime's)."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, status_wait_s: float = 0.5
    ) -> None:
        """``environ``: the environment a restarted server starts from (default: this
        process's); ``status_wait_s``: how long to wait for a reaper's status."""
        self._environ = environ
        self._status_wait_s = status_wait_s

    def alive(self, server: RunningServer) -> bool:
        return server_alive(server)

    def exit_of(
        self, server: RunningServer, log_path: Path, *, starting: bool = False
    ) -> ServerExit | None:
        return server_exit(server, log_path, starting=starting, wait_s=self._status_wait_s)

    def relaunch(self, server: RunningServer) -> LocalRelaunch | None:
        from nodeau.adapters.llama_server import relaunch_for  # the runtimes' own choice

        return relaunch_for(server.command, self._environ)

    def stop(self, server: RunningServer, grace_s: float) -> None:
        stop_server(server, grace_s)

    def found(self, name: str, model_path: str) -> tuple[RunningServer, ...]:
        return found_servers(name, model_path)

    def under(self, models_root: Path) -> tuple[tuple[str, RunningServer], ...]:
        """Every model server of a model under ``models_root``, with its workload's name."""
        return servers_under(models_root)
