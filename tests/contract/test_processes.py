"""Processes found again and stopped through psutil, on real processes.

Every process here is a real Python started by the test and ended by the ``spawn`` fixture
whatever happens. Nothing is asserted about how long anything takes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from nodeau.adapters import processes
from nodeau.adapters.processes import OurProcess

SLEEP = "import time; time.sleep(60)"
# says "term" on SIGTERM and sleeps on: only SIGKILL ends it
IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, lambda *_: print("term", flush=True))
print("ready", flush=True)
time.sleep(60)
"""
# leads a session of its own with a child in it; says the child's pid
WITH_A_CHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""
WAIT_S = 30.0  # a bound for something that happens at once, so a loaded machine passes

pytestmark = pytest.mark.slow

Spawn = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    started: list[subprocess.Popen[str]] = []

    def start(code: str = SLEEP, *, new_session: bool = False) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )
        started.append(child)
        return child

    yield start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=WAIT_S)
        if child.stdout is not None:
            child.stdout.close()


def as_started(child: subprocess.Popen[str]) -> OurProcess:
    """The child as a caller records it: pid, start time and exact command line."""
    created = processes.start_time(child.pid)
    assert created is not None and isinstance(child.args, list)
    return OurProcess(pid=child.pid, created_at=created, command=tuple(map(str, child.args)))


def become_zombie(child: subprocess.Popen[str]) -> None:
    """Wait until the child has ended and not been collected (it stays a zombie: never waited)."""
    deadline = time.monotonic() + WAIT_S
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"pid {child.pid} did not end"
        time.sleep(0.01)


# -- identity


def test_a_running_process_is_ours_by_each_recorded_fact(spawn: Spawn) -> None:
    child = spawn()
    ours = as_started(child)
    assert processes.alive(ours)
    assert processes.alive(OurProcess(pid=child.pid))
    assert processes.alive(OurProcess(pid=child.pid, created_at=ours.created_at))
    assert processes.alive(OurProcess(pid=child.pid, command=ours.command))
    assert processes.alive(OurProcess(pid=child.pid, matches=lambda argv: SLEEP in argv))
    assert processes.alive(OurProcess(pid=child.pid, group=os.getpgid(child.pid)))


def test_a_pid_running_another_process_is_not_ours(spawn: Spawn) -> None:
    """The pid runs, but one recorded fact is another process's: as when a pid is reused."""
    child = spawn()
    ours = as_started(child)
    assert ours.created_at is not None
    others = [
        OurProcess(pid=child.pid, created_at=ours.created_at - 3600.0),  # started an hour before
        OurProcess(pid=child.pid, created_at=ours.created_at, command=("llama-server",)),
        OurProcess(pid=child.pid, matches=lambda argv: "nodeau.apps.endpoint" in argv),
        OurProcess(pid=child.pid, group=os.getpgid(child.pid) + 1),
        # this test's own process, recorded as something it is not
        OurProcess(pid=os.getpid(), command=ours.command),
    ]
    for other in others:
        assert not processes.alive(other), other
        assert processes.rss(other) is None
        assert not processes.send(other, signal.SIGTERM)  # never signalled
        assert not processes.terminate(other, grace_s=0.0)
    assert processes.alive(ours)  # none of that reached it
    assert child.poll() is None


def test_a_pid_that_names_no_single_process_is_never_ours() -> None:
    for pid in (0, -1, -os.getpgrp()):
        nobody = OurProcess(pid=pid)
        assert not processes.alive(nobody)
        assert not processes.send(nobody, signal.SIGCONT)
    assert not processes.signal_group(0, signal.SIGCONT)
    assert not processes.signal_group(os.getpgrp(), signal.SIGCONT)  # never our own group


def test_an_ended_and_collected_process_is_gone(spawn: Spawn) -> None:
    child = spawn("pass")
    child.wait(timeout=WAIT_S)
    gone = OurProcess(pid=child.pid)
    assert not processes.alive(gone)
    assert processes.start_time(child.pid) is None
    assert processes.rss(gone) is None
    assert processes.wait_gone([gone], timeout_s=0.0)
    assert not processes.terminate(gone, grace_s=0.0)


def test_a_zombie_counts_as_gone(spawn: Spawn) -> None:
    child = spawn("pass")
    become_zombie(child)
    zombie = OurProcess(pid=child.pid)
    assert not processes.alive(zombie)
    assert processes.start_time(child.pid) is None
    assert processes.rss(zombie) is None
    assert processes.wait_gone([zombie], timeout_s=0.0)
    assert not processes.send(zombie, signal.SIGKILL)
    assert not processes.terminate(zombie, grace_s=0.0)
    processes.kill(zombie, wait_s=0.0)  # nothing to kill: no ProcessSurvived


# -- memory


def test_the_resident_set_of_a_live_process_is_positive(spawn: Spawn) -> None:
    child = spawn()
    size = processes.rss(as_started(child))
    assert size is not None and size > 0


# -- stopping


def test_terminate_ends_a_process_that_heeds_sigterm(spawn: Spawn) -> None:
    child = spawn()
    ours = as_started(child)
    assert processes.terminate(ours, grace_s=WAIT_S)
    assert not processes.alive(ours)
    assert processes.wait_gone([ours], timeout_s=0.0)


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(spawn: Spawn) -> None:
    child = spawn(IGNORES_SIGTERM)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"  # its handler is in place
    ours = as_started(child)
    assert processes.terminate(ours, grace_s=0.2)
    assert not processes.alive(ours)
    assert child.stdout.read() == "term\n"  # it got SIGTERM, lived on, and SIGKILL ended it


def test_kill_ends_a_process_at_once(spawn: Spawn) -> None:
    child = spawn(IGNORES_SIGTERM)
    ours = as_started(child)
    processes.kill(ours, wait_s=WAIT_S)
    assert not processes.alive(ours)


def test_a_group_leader_is_stopped_with_its_whole_group(spawn: Spawn) -> None:
    leader = spawn(WITH_A_CHILD, new_session=True)
    assert leader.stdout is not None
    grandchild_pid = int(leader.stdout.readline())
    grandchild = OurProcess(pid=grandchild_pid, created_at=processes.start_time(grandchild_pid))
    assert processes.alive(OurProcess(pid=grandchild_pid, group=leader.pid))
    assert processes.terminate(as_started(leader), grace_s=WAIT_S, group=True)
    assert processes.wait_gone([grandchild], timeout_s=WAIT_S)


def test_without_group_only_the_process_itself_is_signalled(spawn: Spawn) -> None:
    leader = spawn(WITH_A_CHILD, new_session=True)
    assert leader.stdout is not None
    grandchild_pid = int(leader.stdout.readline())
    grandchild = OurProcess(pid=grandchild_pid, created_at=processes.start_time(grandchild_pid))
    assert processes.terminate(as_started(leader), grace_s=WAIT_S)
    assert processes.alive(grandchild)  # left running, in the group
    assert processes.signal_group(leader.pid, signal.SIGKILL)  # the group outlives its leader
    assert processes.wait_gone([grandchild], timeout_s=WAIT_S)


def test_waiting_covers_every_process_given(spawn: Spawn) -> None:
    first, second = spawn(), spawn()
    both = [as_started(first), as_started(second)]
    assert not processes.wait_gone(both, timeout_s=0.0)
    assert processes.terminate(both[0], grace_s=WAIT_S)
    assert not processes.wait_gone(both, timeout_s=0.0)  # the second still runs
    assert processes.terminate(both[1], grace_s=WAIT_S)
    assert processes.wait_gone(both, timeout_s=0.0)
