"""The endpoint as a user service: a systemd --user unit, a launchd agent, or a supervised
background process where neither is there, so an endpoint survives closing the terminal.

Why it is so: docs/adr/decisions/adapters.md (user_service.py).
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from attrs import frozen

from nodeau.adapters.loopback_port import listening
from nodeau.adapters.private_files import replace_whole
from nodeau.adapters.service_specs import ServiceSpec, check_name
from nodeau.ports.errors import NodeauError

UNIT_PREFIX = "nodeau-endpoint-"
LABEL_PREFIX = "nodeau.endpoint."
START_LIMIT_BURST = 5
START_LIMIT_INTERVAL_S = 60
STOP_GRACE_S = 10.0
_COMMAND_TIMEOUT_S = 30.0
_SYSTEMD_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
SERVICE_UMASK = 0o077
# What a unit's processes, and a model server the endpoint starts again, run under: each works
# in a user manager without user namespaces (no PrivateUsers=, so none of ProtectSystem=,
# PrivateTmp=...) and nothing here stops CUDA (no MemoryDenyWriteExecute=, PrivateDevices=).
SANDBOX = (
    ("NoNewPrivileges", "yes"),
    ("LockPersonality", "yes"),
    ("RestrictRealtime", "yes"),
    ("RestrictSUIDSGID", "yes"),
    ("RestrictNamespaces", "yes"),
    ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
    ("SystemCallArchitectures", "native"),
    (
        "SystemCallFilter",
        "~@clock @cpu-emulation @debug @module @mount @obsolete @privileged @raw-io @reboot @swap",
    ),
    ("SystemCallErrorNumber", "EPERM"),  # a refused call fails; it does not kill the process
    ("UMask", f"{SERVICE_UMASK:04o}"),
)


class ServiceError(NodeauError):
    """The user service could not be installed, started or stopped; one line for a person."""


class UserService(Protocol):
    """Runs each workload's endpoint as a service that outlives the command that started it."""

    def install(self, spec: ServiceSpec) -> None:
        """Write (or rewrite) the service's definition; starts nothing."""
        ...

    def start(self, name: str) -> None:
        """Start the installed service (already running: nothing to do)."""
        ...

    def stop(self, name: str) -> None:
        """Stop it; the model server is not touched. A stopped or unknown one is fine."""
        ...

    def running(self, name: str) -> bool: ...

    def uninstall(self, name: str) -> None:
        """Stop it and remove its definition."""
        ...

    def describe(self) -> str:
        """What manages the endpoints here, in a few words for a person."""
        ...


# -- systemd --user


def unit_name(name: str) -> str:
    return f"{UNIT_PREFIX}{check_name(name)}.service"


def systemd_word(arg: str) -> str:
    """One argument of an ``ExecStart=`` line, quoted as systemd reads it back: specifiers
    (``%``) and variables (``$``) escaped, quoted when it has anything but plain characters."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_BARE.fullmatch(arg):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(spec: ServiceSpec) -> str:
    """The text of the service's systemd --user unit."""
    exec_start = " ".join(systemd_word(a) for a in spec.command)
    log = str(spec.log_path).replace("%", "%%")
    return "\n".join(
        [
            "# Written by nodeau; rewritten when the workload's endpoint is installed again.",
            "[Unit]",
            f"Description={spec.description}",
            f"StartLimitIntervalSec={START_LIMIT_INTERVAL_S}",
            f"StartLimitBurst={START_LIMIT_BURST}",
            "",
            "[Service]",
            "Type=exec",
            f"ExecStart={exec_start}",
            "Restart=on-failure",
            "RestartSec=1",
            # stopping the endpoint stops the endpoint alone: a model server it started again
            # (supervision) stays loaded, as `nodeau stop NAME` promises
            "KillMode=process",
            f"TimeoutStopSec={STOP_GRACE_S:g}",
            "Environment=PYTHONUNBUFFERED=1",
            f"StandardOutput=append:{log}",
            "StandardError=inherit",
            *(f"{key}={value}" for key, value in SANDBOX),
            "",
        ]
    )


class SystemdUserService:
    """``UserService`` as systemd --user units in ``unit_dir`` (~/.config/systemd/user)."""

    def __init__(self, unit_dir: Path, systemctl: str = "systemctl") -> None:
        self._unit_dir = unit_dir
        self._systemctl = systemctl

    def describe(self) -> str:
        return f"systemd --user units {self._unit_dir / (UNIT_PREFIX + 'NAME.service')}"

    def unit_path(self, name: str) -> Path:
        return self._unit_dir / unit_name(name)

    def install(self, spec: ServiceSpec) -> None:
        write_atomically(self.unit_path(spec.service), systemd_unit(spec).encode())
        self._systemctl_ok("daemon-reload")

    def start(self, name: str) -> None:
        self._systemctl_ok("start", unit_name(name))

    def stop(self, name: str) -> None:
        done = self.run_command("stop", unit_name(name))
        if done.returncode not in (0, 5):  # 5: no such unit loaded, so nothing runs
            raise ServiceError(failure_line(f"systemctl --user stop {unit_name(name)}", done))

    def running(self, name: str) -> bool:
        return self.run_command("is-active", "--quiet", unit_name(name)).returncode == 0

    def uninstall(self, name: str) -> None:
        self.stop(name)
        self.unit_path(name).unlink(missing_ok=True)
        self._systemctl_ok("daemon-reload")

    def _systemctl_ok(self, *args: str) -> None:
        done = self.run_command(*args)
        if done.returncode != 0:
            raise ServiceError(failure_line("systemctl --user " + " ".join(args), done))

    def run_command(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_command([self._systemctl, "--user", *args])


# -- launchd


def launchd_label(name: str) -> str:
    return f"{LABEL_PREFIX}{check_name(name)}"


def launchd_plist(spec: ServiceSpec) -> bytes:
    """The service's launchd agent property list (XML)."""
    return plistlib.dumps(
        {
            "Label": launchd_label(spec.service),
            "ProgramArguments": list(spec.command),
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},
            "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
            "Umask": SERVICE_UMASK,
            "StandardOutPath": str(spec.log_path),
            "StandardErrorPath": str(spec.log_path),
            "ExitTimeOut": int(STOP_GRACE_S),
        }
    )


class LaunchdAgent:
    """``UserService`` as launchd agents in ``agents_dir`` (~/Library/LaunchAgents), loaded
    into ``domain`` (``gui/<uid>``)."""

    def __init__(self, agents_dir: Path, domain: str, launchctl: str = "launchctl") -> None:
        self._agents_dir = agents_dir
        self._domain = domain
        self._launchctl = launchctl

    def describe(self) -> str:
        return f"launchd agents {self._agents_dir / (LABEL_PREFIX + 'NAME.plist')}"

    def plist_path(self, name: str) -> Path:
        return self._agents_dir / f"{launchd_label(name)}.plist"

    def install(self, spec: ServiceSpec) -> None:
        write_atomically(self.plist_path(spec.service), launchd_plist(spec))

    def start(self, name: str) -> None:
        target = f"{self._domain}/{launchd_label(name)}"
        if self.run_command("print", target).returncode == 0:  # loaded already: (re)start it
            args: tuple[str, ...] = ("kickstart", target)
        else:  # loading it starts it (RunAtLoad)
            args = ("bootstrap", self._domain, str(self.plist_path(name)))
        done = self.run_command(*args)
        if done.returncode != 0:
            raise ServiceError(failure_line("launchctl " + " ".join(args), done))

    def stop(self, name: str) -> None:
        target = f"{self._domain}/{launchd_label(name)}"
        if self.run_command("print", target).returncode != 0:
            return  # not loaded: nothing runs
        done = self.run_command("bootout", target)
        if done.returncode != 0:
            raise ServiceError(failure_line(f"launchctl bootout {target}", done))

    def running(self, name: str) -> bool:
        done = self.run_command("print", f"{self._domain}/{launchd_label(name)}")
        return done.returncode == 0 and "state = running" in done.stdout

    def uninstall(self, name: str) -> None:
        self.stop(name)
        self.plist_path(name).unlink(missing_ok=True)

    def run_command(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_command([self._launchctl, *args])


# -- choosing


@frozen(kw_only=True)
class Probe:
    """Whether a service manager answered here, and what it said when it did not."""

    works: bool
    detail: str = ""


def pick_service_manager(platform: str, systemd: Probe, launchd: Probe) -> tuple[str, str]:
    """Which manager to use, ``"systemd"``, ``"launchd"`` or ``"background"``, and why."""
    if platform == "darwin":
        if launchd.works:
            return "launchd", "launchd answers"
        return "background", f"launchctl does not answer: {launchd.detail}"
    if systemd.works:
        return "systemd", "systemctl --user reaches a user manager"
    return "background", f"systemctl --user does not reach a user manager: {systemd.detail}"


def probe_systemd(env: Mapping[str, str]) -> Probe:
    """Whether ``systemctl --user`` reaches a user manager here."""
    return _probe(["systemctl", "--user", "show-environment"], env)


def probe_launchd(env: Mapping[str, str]) -> Probe:
    """Whether ``launchctl`` answers for this user's GUI domain."""
    return _probe(["launchctl", "print", f"gui/{os.getuid()}"], env)


def choose_service_manager(env: Mapping[str, str], platform: str, run_dir: Path) -> UserService:
    """The user service manager to use on this machine; ``describe()`` says which and why."""
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    no_probe = Probe(works=False, detail="not probed")
    systemd = probe_systemd(env) if platform != "darwin" else no_probe
    launchd = probe_launchd(env) if platform == "darwin" else no_probe
    kind, why = pick_service_manager(platform, systemd, launchd)
    if kind == "systemd":
        config = env.get("XDG_CONFIG_HOME", "")
        base = Path(config) if config and Path(config).is_absolute() else home / ".config"
        return SystemdUserService(base / "systemd" / "user")
    if kind == "launchd":
        return LaunchdAgent(home / "Library" / "LaunchAgents", f"gui/{os.getuid()}")
    from nodeau.adapters.supervised_process import BackgroundProcess  # it builds on this module

    return BackgroundProcess(run_dir, reason=why)


# -- plumbing


def wait_until_listening(port: int, timeout_s: float, log: Path, service: str = "") -> None:
    """Return once something accepts connections on 127.0.0.1:``port``; ServiceError
    naming ``log`` (and ``service``, how it runs, when given) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not listening(port):
        if time.monotonic() >= deadline:
            runs = f"; it runs as {service}" if service else ""
            raise ServiceError(
                f"the endpoint did not answer on 127.0.0.1:{port} within {timeout_s:g} s "
                f"(its log: {log}{runs})"
            )
        time.sleep(0.1)


def _probe(command: Sequence[str], env: Mapping[str, str]) -> Probe:
    if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
        return Probe(works=False, detail=f"no {command[0]} on PATH")
    done = run_command(list(command), env)
    if done.returncode == 0:
        return Probe(works=True)
    return Probe(works=False, detail=_last_line(done) or f"exit status {done.returncode}")


def run_command(
    command: list[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=_COMMAND_TIMEOUT_S,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(command, 127, "", " ".join(str(exc).split()))


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines()]
    return next((line for line in reversed(lines) if line), "")


def failure_line(what: str, done: subprocess.CompletedProcess[str]) -> str:
    return f"{what} failed: {_last_line(done) or f'exit status {done.returncode}'}"


def write_atomically(path: Path, data: bytes) -> None:
    try:
        replace_whole(path, data)
    except OSError as exc:
        raise ServiceError(f"{path}: cannot write it ({exc.strerror})") from exc
