"""The fallback user service: a supervised background process, where neither systemd --user
nor launchd answers (``nodeau.adapters.user_service`` chooses it and says why).

Decisions:

* A short-lived launcher starts a supervisor in a new session (so it is nobody's child and no
  terminal's), which runs the endpoint as its child and restarts it when it fails: after 1, 2,
  4 ... 30 s, giving up after 5 failures within 60 s. A clean exit (status 0, or death by
  SIGTERM or SIGINT: uvicorn shuts down gracefully, then re-raises the signal) is not
  restarted.
* The supervisor writes ``NAME.pid`` (its pid, then also its endpoint's) before anything can
  answer, so a stop always finds what a start launched; a start that fails ends what it
  launched.
* Both share the supervisor's process group. Stopping sends SIGTERM to the supervisor (it
  passes it on), then SIGKILL to the group after the grace period, only while one of them is
  still there. A pid is only the supervisor while its command line is the one this module
  starts, and only the endpoint while its command line names the workload and it is in the
  supervisor's group (Linux; elsewhere: while the pid exists, in that group).
* It does not survive a reboot.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import suppress
from pathlib import Path

from nodeau.adapters.detached import launcher_argv
from nodeau.adapters.user_service import (
    START_LIMIT_BURST,
    START_LIMIT_INTERVAL_S,
    STOP_GRACE_S,
    EndpointServiceSpec,
    ServiceError,
    check_name,
    failure_line,
    run_command,
    write_atomically,
)

_COMMAND_TIMEOUT_S = 30.0
_POLL_S = 0.05
_SUPERVISOR_MARK = "nodeau-endpoint-supervisor"


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
        write_atomically(self._spec_path(spec.workload), json.dumps(saved).encode())

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
        done = run_command(list(launcher_argv(log, supervisor)))
        if done.returncode != 0 or not done.stdout.strip().isdigit():
            raise ServiceError(failure_line(f"starting the endpoint of {name} (log {log})", done))
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
            # not _is_supervisor: until the new process has exec'd, its command line is
            # still its parent's, and on a loaded machine that moment can be seen
            if not _alive(supervisor):
                break
            time.sleep(_POLL_S)
        raise ServiceError(f"the endpoint of {name} did not start; see {log}")


# -- processes


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
