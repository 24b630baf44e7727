"""The reaping launcher (adapters/detached.py) on this machine's processes: once it has
answered, the command it started is the only process whose command line names the command's
arguments (a search for the servers of a model file finds the server alone), and the reaper
writes how the command ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from nodeau.adapters.detached import reaped_launcher_argv
from tests.support.real.live_processes import naming

SLEEPER = (sys.executable, "-I", "-S", "-c", "import time; time.sleep(30)")  # then the marker


def test_once_the_launcher_answers_only_the_command_names_its_arguments(tmp_path: Path) -> None:
    for n in range(40):  # the moment right after the answer, many times over
        marker = f"nodeau-detached-{uuid.uuid4().hex}"
        status = tmp_path / f"exit-{n}.json"
        done = subprocess.run(
            reaped_launcher_argv(tmp_path / "log", status, [*SLEEPER, marker]),
            capture_output=True,
            check=True,
        )
        pid = int(done.stdout)
        assert naming(marker) == [pid]
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        said = json.loads(status.read_text())
        assert (said["pid"], said["signal_name"]) == (pid, "SIGTERM")
        assert naming(marker) == []
