"""``ServerWatch`` as ``HomeServerWatch`` answers ``ps``, on real processes: a model server
of this home found by its command line, a starter and a server alive or gone, and no exit
kept for a server that left no reaper's file."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeau.adapters import processes
from nodeau.adapters.server_search import HomeServerWatch
from nodeau.domain.records import RunningServer, Starter
from nodeau.ports.runtime import ServerWatch

SLEEP = "import time; time.sleep(60)"
WAIT_S = 30.0  # a bound for something that happens at once, so a loaded machine passes

pytestmark = pytest.mark.slow


@pytest.fixture
def watch() -> ServerWatch:
    return HomeServerWatch()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], RunningServer]]:
    """A process whose command line is a model server's of a model under this home."""
    model = tmp_path / "home" / "models" / "blobs" / "tiny.gguf"
    command = [sys.executable, "-c", SLEEP, "--alias", "tiny", "--model", str(model)]
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    created = processes.start_time(child.pid)
    assert created is not None
    yield (
        child,
        RunningServer(
            pid=child.pid,
            port=1,
            started_at=datetime.now(UTC),
            command=tuple(command),
            created_at=created,
        ),
    )
    if child.poll() is None:
        child.kill()
    child.wait(timeout=WAIT_S)


def test_a_model_server_of_this_home_is_found_and_none_of_another(
    watch: ServerWatch, server: tuple[subprocess.Popen[bytes], RunningServer], tmp_path: Path
) -> None:
    assert watch.any_under(tmp_path / "home" / "models")
    assert not watch.any_under(tmp_path / "another-home" / "models")


def test_a_server_is_alive_until_it_ends_and_then_no_exit_is_kept_without_a_reaper(
    watch: ServerWatch, server: tuple[subprocess.Popen[bytes], RunningServer], tmp_path: Path
) -> None:
    child, running = server
    assert watch.alive(running)
    child.kill()
    child.wait(timeout=WAIT_S)
    assert not watch.alive(running)
    assert watch.exit_of(running, tmp_path / "home" / "logs" / "tiny.log") is None


def test_a_starter_is_alive_while_it_is_the_same_process(watch: ServerWatch) -> None:
    created = processes.start_time(os.getpid())
    assert created is not None
    assert watch.starter_alive(Starter(pid=os.getpid(), created_at=created))
    # the same pid started at another time is another process: a reused pid is not ours
    assert not watch.starter_alive(Starter(pid=os.getpid(), created_at=created - 1000.0))
