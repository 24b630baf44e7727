"""The installed ``nodeau`` console script answers like a command should."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest


def nodeau(*args: str) -> subprocess.CompletedProcess[str]:
    # the console script installed beside this interpreter, as a user's shell finds it
    exe = Path(sys.executable).parent / "nodeau"
    if not exe.exists():
        pytest.fail(f"the nodeau console script is not installed at {exe}")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_help_names_the_product() -> None:
    done = nodeau("--help")
    assert done.returncode == 0
    assert "Run LLM inference on your own GPU machines" in done.stdout


def test_version_is_the_installed_version() -> None:
    done = nodeau("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == version("nodeau")


def test_an_unknown_command_fails_without_a_traceback() -> None:
    done = nodeau("no-such-command")
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr
    assert "no-such-command" in done.stdout + done.stderr
