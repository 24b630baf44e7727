"""A workload's life once admitted: what its model server's state makes of the workload's.

Why it is so: docs/adr/decisions/domain.md (lifecycle.py).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from attrs import evolve, frozen

from nodeau.domain.health import Health, require_aware
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.restarts import KUBELET, RestartPolicy, backoff, streak_after
from nodeau.domain.workloads import FINISHED, ServerExit, Workload, WorkloadKind, WorkloadState

RESTART_ON_EXIT = False  # a service whose server exits is failed, not restarted (not yet)


class ServerPhase(str, enum.Enum):
    """What a workload's model server is doing, whichever plane runs it."""

    ABSENT = "absent"  # there is none
    STARTING = "starting"  # it exists and does not answer yet (or answers no more)
    READY = "ready"  # it answers requests
    EXITED_OK = "exited-ok"  # it ended cleanly
    EXITED_FAILED = "exited-failed"  # it ended with an error (or was killed)
    DELETING = "deleting"  # it is being taken down


RECOVERY_STATES = frozenset({WorkloadState.HELD})  # waiting on recovery's decision
# a recovering workload starts its new server on the machine it moved to
STARTED = frozenset({WorkloadState.ADMITTED, WorkloadState.STARTING, WorkloadState.RECOVERING})
SUPERVISED = frozenset({WorkloadState.RESTARTING, WorkloadState.EXITED})
EXITED = frozenset({ServerPhase.EXITED_OK, ServerPhase.EXITED_FAILED})
LIVE = STARTED | {WorkloadState.SERVING, WorkloadState.RUNNING, WorkloadState.RESTARTING}


@frozen(kw_only=True)
class ServerRestarts:
    """What a server restarted in place by its own supervisor (a Pod's container, by its
    kubelet) says of its ends; the defaults: it never ended."""

    count: int = 0  # restarts made so far (a kubelet's restartCount)
    last_exit: ServerExit | None = None  # how its latest run ended
    ran_for: timedelta | None = None  # how long that run lasted, when known
    down: bool = False  # that run ended and no new one runs yet
    backing_off: bool = False  # down, waiting out its supervisor's back-off (CrashLoopBackOff)
    backoff: timedelta | None = None  # that back-off, when the supervisor says it
    running_since: datetime | None = None  # when the run now going started

    def __attrs_post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"a restart count counts from 0, got {self.count}")
        if self.down and self.last_exit is None:
            raise ValueError("a server that is down has a last end")
        if self.backing_off and not self.down:
            raise ValueError("only a server that is down backs off")
        if self.backoff is not None and (not self.backing_off or self.backoff < timedelta(0)):
            raise ValueError("a back-off belongs to a server backing off, and is not negative")
        if self.running_since is not None:
            require_aware(self.running_since, "running_since")
            if self.down:
                raise ValueError("a server that is down has no run going")


def next_state(
    state: WorkloadState,
    kind: WorkloadKind,
    server: ServerPhase,
    machine: Health | None,
) -> WorkloadState | None:
    """The workload's next state given its server's phase and its machine's health
    (None: not assessed yet); None when it stays as it is."""
    if not moved_by_server(state, machine) or server is ServerPhase.DELETING:
        return None
    if state in SUPERVISED:
        return back_up(state, kind) if server is ServerPhase.READY else None
    wanted: WorkloadState
    match server:
        case ServerPhase.ABSENT:
            wanted = state if state is WorkloadState.RECOVERING else WorkloadState.STARTING
        case ServerPhase.STARTING:
            wanted = WorkloadState.STARTING if state is WorkloadState.ADMITTED else state
        case ServerPhase.READY:
            up = WorkloadState.SERVING if kind is WorkloadKind.SERVICE else WorkloadState.RUNNING
            wanted = up if state in STARTED else state
        case ServerPhase.EXITED_OK | ServerPhase.EXITED_FAILED:
            wanted = exited(kind, server)
    return None if wanted is state else wanted


def back_up(state: WorkloadState, kind: WorkloadKind) -> WorkloadState | None:
    """A restarting workload whose server answers again serves (or runs) again."""
    if state is not WorkloadState.RESTARTING:
        return None
    return WorkloadState.SERVING if kind is WorkloadKind.SERVICE else WorkloadState.RUNNING


def exited(kind: WorkloadKind, server: ServerPhase) -> WorkloadState:
    """What a workload whose server exited becomes."""
    if kind is WorkloadKind.BATCH:
        return WorkloadState.SUCCEEDED if server is ServerPhase.EXITED_OK else WorkloadState.FAILED
    return WorkloadState.STARTING if RESTART_ON_EXIT else WorkloadState.FAILED


def moved_by_server(state: WorkloadState, machine: Health | None) -> bool:
    """Whether the server's phase decides this workload's next state at all."""
    if state in FINISHED or state in RECOVERY_STATES:
        return False
    return machine is not Health.UNREACHABLE


def needs_server(
    state: WorkloadState, server: ServerPhase, machine: Health | None, *, in_place: bool = False
) -> bool:
    """Whether a server should be made for the workload now (it holds its card, has none,
    and neither recovery nor an unreachable machine stands in the way). A restarting
    workload gets one only where servers are restarted in place (``in_place``): there
    its supervisor restarts a server that is there, and cannot make one that is gone."""
    made_elsewhere = state in SUPERVISED and not (in_place and state is WorkloadState.RESTARTING)
    return server is ServerPhase.ABSENT and not made_elsewhere and moved_by_server(state, machine)


def restarted_in_place(
    w: Workload,
    server: ServerPhase,
    seen: ServerRestarts,
    machine: Health | None,
    at: datetime,
    policy: RestartPolicy = KUBELET,
) -> Workload | None:
    """The workload once what its server, restarted in place, says of its ends is recorded
    (``at``: now); None when that changes nothing (``next_state`` decides then)."""
    require_aware(at, "at")
    if seen.last_exit is None or server not in (ServerPhase.STARTING, ServerPhase.READY):
        return None
    if w.state not in LIVE or not moved_by_server(w.state, machine):
        return None
    up = WorkloadState.SERVING if w.kind is WorkloadKind.SERVICE else WorkloadState.RUNNING
    new_end = w.last_exit is None or not same_end(w.last_exit, seen.last_exit)
    ended = evolve(seen.last_exit, starting=w.state is not up) if new_end else w.last_exit
    assert ended is not None  # new_end, or w.last_exit is not None
    if server is ServerPhase.READY:
        again = w.state is not up or new_end or w.restarts != seen.count
        wanted = evolve(
            w,
            state=up,
            since=at if again else w.since,
            restarts=seen.count,
            last_exit=ended,
            next_attempt=None,
            next_step=None,
        )
        return None if wanted == w else wanted
    if not new_end and w.state is not WorkloadState.RESTARTING:
        return None  # no end since: a busy or loading server stays as it is
    streak = streak_after(w.crash_streak, seen.ran_for, policy) if new_end else w.crash_streak
    if seen.down:
        restarts = seen.count
        next_attempt = ended.at + (seen.backoff or backoff(policy, max(streak, 1)))
    else:  # the supervisor's restart runs and does not answer yet: that is the attempt
        restarts = max(seen.count - 1, 0)
        next_attempt = seen.running_since or ended.at + backoff(policy, max(streak, 1))
    wanted = evolve(
        w,
        state=WorkloadState.RESTARTING,
        since=w.since if w.state is WorkloadState.RESTARTING else ended.at,
        restarts=restarts,
        last_exit=ended,
        crash_streak=streak,
        next_attempt=next_attempt,
        next_step=None,
    )
    return None if wanted == w else wanted


def same_end(a: ServerExit, b: ServerExit) -> bool:
    """Whether two ends are the same one (when it ended, and how), said during a start
    or not."""
    return evolve(a, starting=b.starting) == b


def server_moved(
    record: WorkloadRecord, server: ServerPhase, at: datetime, machine: Health | None = None
) -> WorkloadRecord:
    """The record once its model server is in phase ``server``, by ``next_state``'s rules
    (in its new state since ``at``); as it is when the phase moves nothing. The one-machine
    plane records its server's phases through this, as the fleet's reconcile does."""
    w = record.workload
    wanted = next_state(w.state, w.kind, server, machine)
    return record if wanted is None else with_state(record, wanted, at)


def with_state(record: WorkloadRecord, state: WorkloadState, at: datetime) -> WorkloadRecord:
    """The record in ``state`` since ``at``. A held reason belongs to the held state and is
    dropped (a recovery made stays on record); the next step is the new state's; a next
    restart attempt belongs to ``restarting`` alone."""
    w = evolve(
        record.workload,
        state=state,
        since=at,
        held_reason=None,
        next_step=None,
        next_attempt=record.workload.next_attempt if state is WorkloadState.RESTARTING else None,
    )
    return evolve(record, workload=w)
