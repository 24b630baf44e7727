"""Restarting a workload's model server after it exits: the back-off, and the states it passes.

Why it is so: docs/adr/decisions/domain.md (restarts.py).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from attrs import evolve, frozen

from nodeau.domain.health import require_aware
from nodeau.domain.workloads import (
    ServerExit,
    Workload,
    WorkloadKind,
    WorkloadState,
    exit_words,
    next_clause,
)

__all__ = [
    "KUBELET",
    "UNWATCHED_AFTER",
    "UP",
    "RestartPolicy",
    "ServerExit",
    "as_seen",
    "backoff",
    "due",
    "restart_notice",
    "restarted",
    "retry_after_s",
    "seen_exited",
    "server_exited",
    "start_failed",
    "streak_after",
]

UP = frozenset({WorkloadState.SERVING, WorkloadState.RUNNING})
UNWATCHED_AFTER = timedelta(seconds=150)  # a start's readiness deadline (120 s) and some
LOAD_S = 1  # what a client adds to the wait for the next attempt: the model's load


@frozen(kw_only=True)
class RestartPolicy:
    """How long to wait before each restart: ``first_delay``, doubled per end in a row, at
    most ``max_delay``; a server that ran ``reset_after`` starts the count again."""

    first_delay: timedelta = timedelta(seconds=10)
    max_delay: timedelta = timedelta(minutes=5)
    reset_after: timedelta = timedelta(minutes=10)

    def __attrs_post_init__(self) -> None:
        if self.first_delay <= timedelta(0) or self.reset_after <= timedelta(0):
            raise ValueError("a restart policy's delays are positive")
        if self.max_delay < self.first_delay:
            raise ValueError("a restart policy's largest delay is at least its first")


KUBELET = RestartPolicy()  # 10 s doubling, capped at 5 min, reset after 10 min running


def backoff(policy: RestartPolicy, streak: int) -> timedelta:
    """The wait before the restart that follows the ``streak``-th end in a row (from 1)."""
    if streak < 1:
        raise ValueError(f"a streak counts ends from 1, got {streak}")
    delay = policy.first_delay
    for _ in range(streak - 1):
        if delay >= policy.max_delay:
            break
        delay *= 2
    return min(delay, policy.max_delay)


def streak_after(streak: int, ran_for: timedelta | None, policy: RestartPolicy) -> int:
    """The streak once a server that ran ``ran_for`` (None: unknown) has ended: a new one
    when it ran ``reset_after`` or longer, else one more."""
    if ran_for is not None and ran_for >= policy.reset_after:
        return 1
    return streak + 1


def server_exited(
    w: Workload, ended: ServerExit, ran_for: timedelta | None, policy: RestartPolicy
) -> Workload:
    """A serving or running workload whose model server ended: restarting since the end,
    its next attempt one back-off step later."""
    if w.state not in UP:
        raise ValueError(f"only a serving or running workload's server exits, not {w.state.value}")
    streak = streak_after(w.crash_streak, ran_for, policy)
    return evolve(
        w,
        state=WorkloadState.RESTARTING,
        since=ended.at,
        last_exit=ended,
        crash_streak=streak,
        next_attempt=ended.at + backoff(policy, streak),
        next_step=None,
    )


def due(w: Workload, now: datetime) -> bool:
    """Whether a restarting workload's next attempt is due."""
    require_aware(now, "now")
    return (
        w.state is WorkloadState.RESTARTING and w.next_attempt is not None and w.next_attempt <= now
    )


def restarted(w: Workload, at: datetime) -> Workload:
    """A restarting workload whose server started again and answers: up since ``at``."""
    if w.state is not WorkloadState.RESTARTING:
        raise ValueError(f"only a restarting workload is restarted, not {w.state.value}")
    up = WorkloadState.SERVING if w.kind is WorkloadKind.SERVICE else WorkloadState.RUNNING
    return evolve(w, state=up, since=at, restarts=w.restarts + 1, next_attempt=None, next_step=None)


def start_failed(w: Workload, ended: ServerExit, policy: RestartPolicy) -> Workload:
    """A restart that did not come up: still restarting, the next attempt one step later."""
    if w.state is not WorkloadState.RESTARTING:
        raise ValueError(f"only a restarting workload's start fails, not {w.state.value}")
    streak = w.crash_streak + 1
    return evolve(
        w,
        restarts=w.restarts + 1,
        last_exit=ended,
        crash_streak=streak,
        next_attempt=ended.at + backoff(policy, streak),
    )


def seen_exited(w: Workload, ended: ServerExit) -> Workload:
    """What ``nodeau ps`` shows for a serving or running workload whose server it found gone
    before any supervisor recorded it: exited since the end."""
    return evolve(w, state=WorkloadState.EXITED, since=ended.at, last_exit=ended, next_attempt=None)


def as_seen(w: Workload, now: datetime, unwatched_after: timedelta = UNWATCHED_AFTER) -> Workload:
    """The workload as ``nodeau ps`` shows it: a restart overdue by more than
    ``unwatched_after`` has nobody to make it, so it is shown exited."""
    require_aware(now, "now")
    if w.state is not WorkloadState.RESTARTING or w.next_attempt is None:
        return w
    if now - w.next_attempt <= unwatched_after:
        return w
    return evolve(w, state=WorkloadState.EXITED, next_attempt=None, next_step=None)


def retry_after_s(w: Workload, now: datetime) -> int:
    """Seconds a client of a restarting workload waits before asking again: until the next
    attempt (rounded up), plus ``LOAD_S``."""
    require_aware(now, "now")
    if w.next_attempt is None:
        return LOAD_S
    left = math.ceil((w.next_attempt - now).total_seconds())
    return max(left, 0) + LOAD_S


def restart_notice(w: Workload) -> str:
    """What a client of a restarting workload is told: how its server ended, what comes next."""
    if w.state is not WorkloadState.RESTARTING or w.last_exit is None:
        raise ValueError(f"{w.name} is not restarting")
    return f"{w.name} is restarting: {exit_words(w.last_exit)}; {next_clause(w)}"
