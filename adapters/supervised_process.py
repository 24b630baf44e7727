"""The fallback user service: a supervised background process, where neither systemd --user
nor launchd answers (``nodeau.adapters.user_service`` chooses it and says why).

Why it is so: docs/adr/decisions/adapters.md (supervised_process.py).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from contextlib import suppress
from functools import partial
from pathlib import Path

from nodeau.adapters import processes
from nodeau.adapters.detached import launcher_argv
from nodeau.adapters.service_specs import ServiceSpec, check_name
from nodeau.adapters.user_service import (
    START_LIMIT_BURST,
    START_LIMIT_INTERVAL_S,
    STOP_GRACE_S,
    ServiceError,
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

    def install(self, spec: ServiceSpec) -> None:
        saved = {"command": list(spec.command), "log": str(spec.log_path)}
        write_atomically(self._spec_path(spec.service), json.dumps(saved).encode())

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
        launched = processes.OurProcess(
            pid=supervisor_pid, created_at=processes.start_time(supervisor_pid)
        )
        try:
            self._wait_for_pid_file(name, launched, log)
        except BaseException:
            self._end_group(launched, name)  # never leave behind what could not start
            raise

    def stop(self, name: str, grace_s: float = STOP_GRACE_S) -> None:
        pids = self._pids(name)
        if pids is None:
            return
        supervisor = self._supervisor(pids[0], name)
        group = supervisor.pid  # the supervisor leads its session, so its pid is the group's id
        endpoint = None if pids[1] is None else _endpoint(pids[1], name, group)
        with suppress(processes.ProcessDenied):
            if not processes.send(supervisor, signal.SIGTERM) and endpoint is not None:
                processes.send(endpoint, signal.SIGTERM)  # its supervisor is gone, it is not
        ours = [supervisor] if endpoint is None else [supervisor, endpoint]
        if not processes.wait_gone(ours, grace_s):
            processes.signal_group(group, signal.SIGKILL)
        self._pid_path(name).unlink(missing_ok=True)

    def running(self, name: str) -> bool:
        pids = self._pids(name)
        return pids is not None and processes.alive(self._supervisor(pids[0], name))

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

    def _end_group(self, launched: processes.OurProcess, name: str) -> None:
        """SIGTERM to a supervisor this object launched, then SIGKILL to its group."""
        supervisor = self._supervisor(launched.pid, name)
        with suppress(processes.ProcessDenied):
            if processes.send(supervisor, signal.SIGTERM):
                processes.wait_gone([supervisor], STOP_GRACE_S)
            processes.send(launched, signal.SIGKILL, group=True)

    def _supervisor(self, pid: int, name: str) -> processes.OurProcess:
        """The supervisor of ``name``: the pid while its command line is the one ``start``
        runs (a zombie's is empty, so an ended supervisor never matches)."""
        return processes.OurProcess(
            pid=pid, matches=partial(_is_supervisor_command, pid_file=str(self._pid_path(name)))
        )

    def _wait_for_pid_file(self, name: str, launched: processes.OurProcess, log: Path) -> None:
        deadline = time.monotonic() + _COMMAND_TIMEOUT_S
        while time.monotonic() < deadline:
            pids = self._pids(name)
            if pids is not None and pids[0] == launched.pid:
                return
            # by its start time, not its command line: until the new process has exec'd, its
            # command line is still its parent's, and on a loaded machine that moment is seen
            if not processes.alive(launched):
                break
            time.sleep(_POLL_S)
        raise ServiceError(f"the endpoint of {name} did not start; see {log}")


# -- processes


def _is_supervisor_command(args: tuple[str, ...], *, pid_file: str) -> bool:
    # [python, -I, -S, -c, script, pid file, command...]
    return len(args) > 5 and _SUPERVISOR_MARK in args[4] and args[5] == pid_file


def _is_endpoint_command(args: tuple[str, ...], *, name: str) -> bool:
    named = any(args[i : i + 2] == ("--workload", name) for i in range(len(args)))
    return "nodeau.apps.endpoint" in args and named


def _endpoint(pid: int, name: str, group: int) -> processes.OurProcess:
    """Workload ``name``'s endpoint: the pid while it runs in the supervisor's ``group`` with
    a command line naming the workload."""
    return processes.OurProcess(
        pid=pid, group=group, matches=partial(_is_endpoint_command, name=name)
    )
