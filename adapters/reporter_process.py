"""The reporter as a background process: started by ``connect --fleet``, stopped by
``disconnect``, found by ``status``.

Why it is so: docs/adr/decisions/adapters.md (reporter_process.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nodeau.adapters import processes
from nodeau.adapters.detached import launcher_argv
from nodeau.ports.cloud import CloudStateError

MODULE = "nodeau.apps.cloud"
META = "reporter.json"
LOG = "reporter.log"
STOP_GRACE_S = 10.0


def command(home: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", MODULE, "--home", str(home))


def _ours(folder: Path) -> processes.OurProcess | None:
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid, argv = (meta.get(k) for k in ("pid", "command")) if isinstance(meta, dict) else (0, 0)
    if not isinstance(pid, int) or not isinstance(argv, list):
        return None
    if not all(isinstance(a, str) for a in argv):
        return None
    return processes.OurProcess(pid=pid, command=tuple(argv))


class DetachedReporter:
    """``ports.cloud.Reporter``: the reporter as a detached process, found by the pid and
    command kept in its folder."""

    def running(self, folder: Path) -> int | None:
        """The reporter's pid while it runs; None otherwise."""
        ours = _ours(folder)
        return ours.pid if ours is not None and processes.alive(ours) else None

    def stop(self, folder: Path) -> bool:
        """Stop the reporter (SIGTERM, then SIGKILL); whether one was running."""
        ours = _ours(folder)
        if ours is None:
            return False
        try:
            stopped = processes.terminate(ours, STOP_GRACE_S)
        except processes.ProcessError as exc:
            raise CloudStateError(f"the reporter (pid {exc.pid}) could not be stopped") from exc
        (folder / META).unlink(missing_ok=True)
        return stopped

    def start(self, home: Path, folder: Path) -> int:
        """Start the reporter detached (stopping one already running first); its pid."""
        self.stop(folder)
        argv = command(home)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            launched = subprocess.run(
                launcher_argv(folder / LOG, argv),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise CloudStateError(f"cannot start the reporter: {exc}") from exc
        out = launched.stdout.decode("utf-8", "replace").strip()
        if launched.returncode != 0 or not out.isdigit():
            raise CloudStateError(f"cannot start the reporter: {out}")
        pid = int(out)
        (folder / META).write_text(
            json.dumps({"pid": pid, "command": list(argv)}), encoding="utf-8"
        )
        return pid
