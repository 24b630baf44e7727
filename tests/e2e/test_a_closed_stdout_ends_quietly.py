"""A command whose reader stops reading (``nodeau environment | head -1``) ends quietly.

The installed ``nodeau`` is run with its stdout on a pipe whose reading end is already
closed, so its first write finds the pipe broken whatever the timing: it prints nothing
on stderr (no traceback, no message) and exits 141, as ``ls | head`` does.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.real.cli import NODEAU, Cli


@pytest.mark.parametrize("args", [("environment",), ("ps",), ("ps", "--json"), ("fleet", "list")])
def test_a_closed_stdout_ends_the_command_with_no_traceback(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    reading, writing = os.pipe()
    os.close(reading)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [str(NODEAU), *args],
            env=cli.env,
            stdout=writing,
            stderr=subprocess.PIPE,
            text=True,
            timeout=cli.timeout_s,
            check=False,
        )
    finally:
        os.close(writing)
    assert (done.returncode, done.stderr) == (141, "")


def test_the_same_command_read_to_its_end_still_succeeds(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    done = cli("environment")
    assert done.returncode == 0 and done.stdout.startswith("machine  testbox")
