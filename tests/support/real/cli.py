"""The installed ``nodeau`` command as end-to-end tests run it: its own data folder and settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NODEAU = Path(sys.executable).parent / "nodeau"


class Cli:
    """Runs ``nodeau`` with NODEAU_HOME under the test's folder, on machine "testbox".

    ``settings`` adds or overrides NODEAU_* variables (catalog, publisher,
    simulated cards, ...).
    """

    def __init__(self, home: Path, timeout_s: float = 180, **settings: str) -> None:
        self.timeout_s = timeout_s
        self.env = {
            **os.environ,
            "NODEAU_HOME": str(home),
            "NODEAU_MACHINE": "testbox",
            "NODEAU_DISK_RESERVE_BYTES": "0",
            **settings,
        }

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(NODEAU), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
            check=False,
        )

    def json(self, *args: str) -> object:
        """The parsed ``--json`` output of a command that must succeed."""
        done = self(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start ``nodeau`` without waiting (for commands that wait on something the test does)."""
        return subprocess.Popen(
            [str(NODEAU), *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def stop_everything(self) -> None:
        """What a test leaves running in its home, ended: the dashboard and every workload."""
        self("dashboard", "--stop")
        done = self("ps", "--json")
        if done.returncode == 0:
            for row in json.loads(done.stdout):
                self("stop", row["name"], "--workload")
