"""The endpoint as a user service: a systemd --user unit, a launchd agent, or a supervised
background process where neither is there, so an endpoint survives closing the terminal.

Decisions:

* One service per workload, named after it: ``nodeau-endpoint-NAME.service`` (systemd),
  label ``nodeau.endpoint.NAME`` (launchd), ``NAME.*`` files in a run folder (fallback).
  Names are letters, digits, ``.``, ``_`` and ``-`` (a unit name, a label and a file name
  all take them as they are); any other name is refused (ValueError), never escaped.
* The service runs ``python -m nodeau.apps.endpoint --workload NAME --port P --state PATH``
  with the Python that installed it, appending its output to the workload's endpoint log.
* Restarted when it fails, boundedly: systemd ``Restart=on-failure`` (5 starts in 60 s),
  launchd ``KeepAlive`` unless it exits cleanly (launchd throttles respawns to one per 10 s),
  the fallback's supervisor after 1, 2, 4 ... 30 s, giving up after 5 failures in 60 s. A
  clean exit is never restarted: status 0, or death by SIGTERM or SIGINT (uvicorn shuts down
  gracefully, then re-raises the signal; systemd counts those signals as clean too).
* Units are not enabled: after a reboot the model is not loaded either, and ``nodeau``
  starts both. A systemd --user service stops when the user's last session ends unless
  lingering is on (``loginctl enable-linger``); closing one terminal never stops it.
* systemd is chosen only when ``systemctl --user`` really reaches a user manager (in
  containers it usually does not); launchd on macOS when ``launchctl`` reaches the
  user's GUI domain; otherwise the fallback, and ``describe()`` says which and why.
* The fallback: a short-lived launcher starts a supervisor in a new session (so it is nobody's
  child and no terminal's), which runs the endpoint as its child and restarts it. Both share
  the supervisor's process group; stopping sends SIGTERM to the supervisor (it passes it on),
  then SIGKILL to the whole group after the grace period. A pid is only the supervisor while
  its command line is the one this module starts (Linux; elsewhere: while the pid exists).
  It does not survive a reboot.
"""

from __future__ import annotations

import json
import os
import plistlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Protocol

from attrs import frozen

UNIT_PREFIX = "nodeau-endpoint-"
LABEL_PREFIX = "nodeau.endpoint."
START_LIMIT_BURST = 5
START_LIMIT_INTERVAL_S = 60
STOP_GRACE_S = 10.0
_COMMAND_TIMEOUT_S = 30.0
_POLL_S = 0.05
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")
_SYSTEMD_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SUPERVISOR_MARK = "nodeau-endpoint-supervisor"


class ServiceError(Exception):
    """The user service could not be installed, started or stopped; one line for a person."""


@frozen(kw_only=True)
class EndpointServiceSpec:
    """One workload's endpoint as a service: what runs, on which port, logging where."""

    workload: str
    port: int
    state_path: Path
    log_path: Path
    python: Path  # the interpreter that has nodeau installed (sys.executable)

    def __attrs_post_init__(self) -> None:
        check_name(self.workload)
        if not 1 <= self.port <= 65535:
            raise ValueError(f"{self.port} is not a TCP port")
        for what, path in (
            ("state", self.state_path),
            ("log", self.log_path),
            ("python", self.python),
        ):
            if not path.is_absolute():
                raise ValueError(f"the {what} path must be absolute, not {path}")
            if any(ord(c) < 32 or ord(c) == 127 for c in str(path)):
                raise ValueError(f"the {what} path has a control character: {str(path)!r}")

    @property
    def command(self) -> tuple[str, ...]:
        return (
            str(self.python), "-m", "nodeau.apps.endpoint",
            "--workload", self.workload,
            "--port", str(self.port),
            "--state", str(self.state_path),
        )  # fmt: skip


def check_name(name: str) -> str:
    """``name`` when it can name a service; ValueError otherwise."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"workload name {name!r} cannot name a user service: letters, digits, '.', '_' and "
            "'-' only, starting with a letter or digit"
        )
    return name


class UserService(Protocol):
    """Runs each workload's endpoint as a service that outlives the command that started it."""

    def install(self, spec: EndpointServiceSpec) -> None:
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


def systemd_unit(spec: EndpointServiceSpec) -> str:
    """The text of the workload's systemd --user unit."""
    exec_start = " ".join(systemd_word(a) for a in spec.command)
    log = str(spec.log_path).replace("%", "%%")
    return "\n".join(
        [
            "# Written by nodeau; rewritten when the workload's endpoint is installed again.",
            "[Unit]",
            f"Description=Nodeau endpoint of workload {spec.workload} on 127.0.0.1:{spec.port}",
            f"StartLimitIntervalSec={START_LIMIT_INTERVAL_S}",
            f"StartLimitBurst={START_LIMIT_BURST}",
            "",
            "[Service]",
            "Type=exec",
            f"ExecStart={exec_start}",
            "Restart=on-failure",
            "RestartSec=1",
            f"TimeoutStopSec={STOP_GRACE_S:g}",
            "Environment=PYTHONUNBUFFERED=1",
            f"StandardOutput=append:{log}",
            "StandardError=inherit",
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

    def install(self, spec: EndpointServiceSpec) -> None:
        _write_atomically(self.unit_path(spec.workload), systemd_unit(spec).encode())
        self._systemctl_ok("daemon-reload")

    def start(self, name: str) -> None:
        self._systemctl_ok("start", unit_name(name))

    def stop(self, name: str) -> None:
        done = self._run("stop", unit_name(name))
        if done.returncode not in (0, 5):  # 5: no such unit loaded, so nothing runs
            raise ServiceError(_failure(f"systemctl --user stop {unit_name(name)}", done))

    def running(self, name: str) -> bool:
        return self._run("is-active", "--quiet", unit_name(name)).returncode == 0

    def uninstall(self, name: str) -> None:
        self.stop(name)
        self.unit_path(name).unlink(missing_ok=True)
        self._systemctl_ok("daemon-reload")

    def _systemctl_ok(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            raise ServiceError(_failure("systemctl --user " + " ".join(args), done))

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([self._systemctl, "--user", *args])


# -- launchd


def launchd_label(name: str) -> str:
    return f"{LABEL_PREFIX}{check_name(name)}"


def launchd_plist(spec: EndpointServiceSpec) -> bytes:
    """The workload's launchd agent property list (XML)."""
    return plistlib.dumps(
        {
            "Label": launchd_label(spec.workload),
            "ProgramArguments": list(spec.command),
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},
            "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
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

    def install(self, spec: EndpointServiceSpec) -> None:
        _write_atomically(self.plist_path(spec.workload), launchd_plist(spec))

    def start(self, name: str) -> None:
        target = f"{self._domain}/{launchd_label(name)}"
        if self._run("print", target).returncode == 0:  # loaded already: (re)start it
            args: tuple[str, ...] = ("kickstart", target)
        else:  # loading it starts it (RunAtLoad)
            args = ("bootstrap", self._domain, str(self.plist_path(name)))
        done = self._run(*args)
        if done.returncode != 0:
            raise ServiceError(_failure("launchctl " + " ".join(args), done))

    def stop(self, name: str) -> None:
        target = f"{self._domain}/{launchd_label(name)}"
        if self._run("print", target).returncode != 0:
            return  # not loaded: nothing runs
        done = self._run("bootout", target)
        if done.returncode != 0:
            raise ServiceError(_failure(f"launchctl bootout {target}", done))

    def running(self, name: str) -> bool:
        done = self._run("print", f"{self._domain}/{launchd_label(name)}")
        return done.returncode == 0 and "state = running" in done.stdout

    def uninstall(self, name: str) -> None:
        self.stop(name)
        self.plist_path(name).unlink(missing_ok=True)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([self._launchctl, *args])


# -- the fallback: a supervised background process

# Runs as `python -I -S -c _LAUNCHER <log> <command...>`: starts the supervisor in a new
# session with its output appended to the log, prints its pid and exits without waiting.
_LAUNCHER = """
import os, subprocess, sys
try:
    with open(sys.argv[1], "ab") as log:
        child = subprocess.Popen(
            sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
except OSError as exc:
    sys.stdout.write("error: " + str(exc))
    sys.stdout.flush()
    os._exit(1)
sys.stdout.write(str(child.pid))
sys.stdout.flush()
os._exit(0)
"""

# Runs as `python -I -S -c _SUPERVISOR <pid file> <command...>`, its output on the log.
_SUPERVISOR = f"""# {_SUPERVISOR_MARK}
import json, os, signal, subprocess, sys, time
PID_FILE, COMMAND = sys.argv[1], sys.argv[2:]
MAX_FAILURES, WINDOW_S = {START_LIMIT_BURST}, {START_LIMIT_INTERVAL_S}
FIRST_DELAY_S, MAX_DELAY_S = 1.0, 30.0
stopping, child = False, None
def note(text):
    print(time.strftime("%Y-%m-%dT%H:%M:%S") + " nodeau supervisor: " + text, flush=True)
def on_stop(signum, frame):
    global stopping
    stopping = True
    if child is not None and child.poll() is None:
        child.send_signal(signal.SIGTERM)
signal.signal(signal.SIGTERM, on_stop)
signal.signal(signal.SIGINT, on_stop)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
def write_pids(endpoint):
    with open(PID_FILE + ".tmp", "w") as f:
        json.dump({{"supervisor": os.getpid(), "endpoint": endpoint}}, f)
    os.replace(PID_FILE + ".tmp", PID_FILE)
failures, delay = [], FIRST_DELAY_S
try:
    write_pids(None)
    while not stopping:
        began = time.monotonic()
        child = subprocess.Popen(COMMAND, stdin=subprocess.DEVNULL)
        write_pids(child.pid)
        if stopping:
            child.send_signal(signal.SIGTERM)
        code = child.wait()
        if stopping:
            break
        if code in (0, -signal.SIGTERM, -signal.SIGINT):
            note("the endpoint was stopped or exited cleanly; not restarting it")
            break
        now = time.monotonic()
        if now - began > WINDOW_S:
            delay = FIRST_DELAY_S
        failures = [t for t in failures if now - t < WINDOW_S] + [now]
        if len(failures) >= MAX_FAILURES:
            note(f"the endpoint failed {{len(failures)}} times within {{WINDOW_S}} s "
                 f"(last exit status {{code}}); giving up")
            break
        note(f"the endpoint exited with status {{code}}; restarting it in {{delay:g}} s")
        until = time.monotonic() + delay
        while not stopping and time.monotonic() < until:
            time.sleep(0.05)
        delay = min(delay * 2, MAX_DELAY_S)
finally:
    try:
        os.unlink(PID_FILE)
    except OSError:
        pass
"""


class BackgroundProcess:
    """``UserService`` as a supervised background process, its files in ``run_dir``:
    ``NAME.json`` (the installed spec) and ``NAME.pid`` (supervisor and endpoint pids)."""

    def __init__(self, run_dir: Path, reason: str = "no systemd --user or launchd here") -> None:
        self._run_dir = run_dir
        self._reason = reason

    def describe(self) -> str:
        return (
            f"a supervised background process ({self._reason}); it restarts a failed endpoint "
            "but does not survive a reboot"
        )

    def install(self, spec: EndpointServiceSpec) -> None:
        saved = {"command": list(spec.command), "log": str(spec.log_path)}
        _write_atomically(self._spec_path(spec.workload), json.dumps(saved).encode())

    def start(self, name: str) -> None:
        if self.running(name):
            return
        try:
            saved = json.loads(self._spec_path(name).read_text())
        except (OSError, ValueError) as exc:
            raise ServiceError(f"{self._spec_path(name)}: no installed endpoint ({exc})") from exc
        log = Path(saved["log"])
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ServiceError(f"{log.parent}: cannot create it ({exc.strerror})") from exc
        pid_file = self._pid_path(name)
        pid_file.unlink(missing_ok=True)
        supervisor = [sys.executable, "-I", "-S", "-c", _SUPERVISOR, str(pid_file)]
        supervisor += [str(a) for a in saved["command"]]
        done = _run([sys.executable, "-I", "-S", "-c", _LAUNCHER, str(log), *supervisor])
        if done.returncode != 0 or not done.stdout.strip().isdigit():
            raise ServiceError(_failure(f"starting the endpoint of {name} (log {log})", done))
        supervisor_pid = int(done.stdout.strip())
        try:
            self._wait_for_pid_file(name, supervisor_pid, log)
        except BaseException:
            self._end_group(supervisor_pid, name)  # never leave behind what could not start
            raise

    def stop(self, name: str, grace_s: float = STOP_GRACE_S) -> None:
        pids = self._pids(name)
        if pids is None:
            return
        supervisor, endpoint = pids
        group = supervisor  # the supervisor leads its session, so its pid is the group's id

        def left() -> bool:
            return self._is_supervisor(supervisor, name) or _is_endpoint(endpoint, name, group)

        if self._is_supervisor(supervisor, name):
            _signal(supervisor, signal.SIGTERM, group=False)  # it passes it on to the endpoint
        elif endpoint is not None and _is_endpoint(endpoint, name, group):
            _signal(endpoint, signal.SIGTERM, group=False)  # its supervisor is gone, it is not
        deadline = time.monotonic() + grace_s
        while left() and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        if left():
            _signal(group, signal.SIGKILL, group=True)
        self._pid_path(name).unlink(missing_ok=True)

    def running(self, name: str) -> bool:
        pids = self._pids(name)
        return pids is not None and self._is_supervisor(pids[0], name)

    def uninstall(self, name: str) -> None:
        self.stop(name)
        self._spec_path(name).unlink(missing_ok=True)

    def _spec_path(self, name: str) -> Path:
        return self._run_dir / f"{check_name(name)}.json"

    def _pid_path(self, name: str) -> Path:
        return self._run_dir / f"{check_name(name)}.pid"

    def _pids(self, name: str) -> tuple[int, int | None] | None:
        try:
            saved = json.loads(self._pid_path(name).read_text())
            endpoint = saved["endpoint"]
            return int(saved["supervisor"]), None if endpoint is None else int(endpoint)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _end_group(self, supervisor: int, name: str) -> None:
        """SIGTERM to a supervisor this object launched, then SIGKILL to its group."""
        if self._is_supervisor(supervisor, name):
            _signal(supervisor, signal.SIGTERM, group=False)
            deadline = time.monotonic() + STOP_GRACE_S
            while self._is_supervisor(supervisor, name) and time.monotonic() < deadline:
                time.sleep(_POLL_S)
        with suppress(OSError):
            if os.getpgid(supervisor) == supervisor:
                os.killpg(supervisor, signal.SIGKILL)

    def _is_supervisor(self, pid: int, name: str) -> bool:
        if not sys.platform.startswith("linux"):
            return _alive(pid)
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        # a zombie's command line is empty, so an ended supervisor never matches
        args = [os.fsdecode(a) for a in raw.split(b"\0")]
        # [python, -I, -S, -c, script, pid file]
        return (
            len(args) > 5 and _SUPERVISOR_MARK in args[4] and args[5] == str(self._pid_path(name))
        )

    def _wait_for_pid_file(self, name: str, supervisor: int, log: Path) -> None:
        deadline = time.monotonic() + _COMMAND_TIMEOUT_S
        while time.monotonic() < deadline:
            pids = self._pids(name)
            if pids is not None and pids[0] == supervisor:
                return
            if not self._is_supervisor(supervisor, name):
                break
            time.sleep(_POLL_S)
        raise ServiceError(f"the endpoint of {name} did not start; see {log}")


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
    return BackgroundProcess(run_dir, reason=why)


# -- plumbing


def _probe(command: Sequence[str], env: Mapping[str, str]) -> Probe:
    if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
        return Probe(works=False, detail=f"no {command[0]} on PATH")
    done = _run(list(command), env)
    if done.returncode == 0:
        return Probe(works=True)
    return Probe(works=False, detail=_last_line(done) or f"exit status {done.returncode}")


def _run(
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


def _failure(what: str, done: subprocess.CompletedProcess[str]) -> str:
    return f"{what} failed: {_last_line(done) or f'exit status {done.returncode}'}"


def _write_atomically(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as exc:
        raise ServiceError(f"{path}: cannot write it ({exc.strerror})") from exc


def _alive(pid: int) -> bool:
    """Whether a process runs with this pid (a zombie does not run)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: the pid exists
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _is_endpoint(pid: int | None, name: str, group: int) -> bool:
    """Whether ``pid`` is still workload ``name``'s endpoint, started in process group
    ``group`` (Linux: by its command line too)."""
    if pid is None:
        return False
    try:
        if not _alive(pid) or os.getpgid(pid) != group:
            return False
    except OSError:
        return False
    if not sys.platform.startswith("linux"):
        return True
    try:
        args = [os.fsdecode(a) for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return False
    named = any(args[i : i + 2] == ["--workload", name] for i in range(len(args)))
    return "nodeau.apps.endpoint" in args and named


def _signal(pid: int, sig: signal.Signals, *, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
