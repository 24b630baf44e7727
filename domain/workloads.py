"""Workloads: the states a workload passes through and the sentence ``nodeau ps`` prints.

Why it is so: docs/adr/decisions/domain.md (workloads.py).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from attrs import evolve, frozen

from nodeau.domain.health import clock_time, require_aware


class WorkloadKind(str, enum.Enum):
    """A service serves indefinitely; a batch job runs and finishes."""

    SERVICE = "service"
    BATCH = "batch"


class WorkloadState(str, enum.Enum):
    """Where a workload is in its life, as ``nodeau ps`` shows it."""

    ADMITTED = "admitted"
    STARTING = "starting"
    SERVING = "serving"
    RUNNING = "running"
    HELD = "held"
    RECOVERING = "recovering"
    RESTARTING = "restarting"  # its model server exited; started again after a back-off
    EXITED = "exited"  # shown only: its model server is gone and no supervisor said so yet
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"


class HeldReason(str, enum.Enum):
    """Why a held workload is waiting instead of moving."""

    MACHINE_UNREACHABLE_RECOVERY_OFF = "machine-unreachable-recovery-off"
    WAITING_FOR_DELAY = "waiting-for-delay"
    ON_CONTROL_PLANE_MACHINE = "on-control-plane-machine"
    BATCH_JOB = "batch-job"
    MODEL_FILES = "model-files"
    CAPACITY = "capacity"
    FLEET_QUIET = "fleet-quiet"  # most of the fleet went quiet at once: suspect the view
    LIMITS = "limits"  # only the organisation's limits or the plan's bounds stand in the way


class RecoveryMode(str, enum.Enum):
    """What a workload does when its machine stops answering (``never`` is the default)."""

    NEVER = "never"
    AUTOMATIC = "automatic"


FINISHED = frozenset({WorkloadState.SUCCEEDED, WorkloadState.FAILED, WorkloadState.STOPPED})

# The kind and recovery mode each held reason can belong to.
HELD_REASON_FITS = {
    HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF: (WorkloadKind.SERVICE, RecoveryMode.NEVER),
    HeldReason.WAITING_FOR_DELAY: (WorkloadKind.SERVICE, RecoveryMode.AUTOMATIC),
    HeldReason.ON_CONTROL_PLANE_MACHINE: (WorkloadKind.SERVICE, RecoveryMode.AUTOMATIC),
    HeldReason.BATCH_JOB: (WorkloadKind.BATCH, RecoveryMode.NEVER),
    HeldReason.MODEL_FILES: (WorkloadKind.SERVICE, RecoveryMode.AUTOMATIC),
    HeldReason.CAPACITY: (WorkloadKind.SERVICE, RecoveryMode.AUTOMATIC),
    HeldReason.FLEET_QUIET: (WorkloadKind.SERVICE, RecoveryMode.AUTOMATIC),
    HeldReason.LIMITS: (WorkloadKind.SERVICE, RecoveryMode.AUTOMATIC),
}


class ExitKind(str, enum.Enum):
    """How a model server ended."""

    EXITED = "exited"  # with an exit code
    KILLED = "killed"  # by a signal
    UNKNOWN = "unknown"  # its process is gone and no exit status was kept
    NOT_READY = "not-ready"  # a start that did not answer by its deadline (stopped)
    NOT_STARTED = "not-started"  # a start that launched no process (``reason`` says why)


@frozen(kw_only=True)
class ServerExit:
    """How and when a workload's model server ended; ``starting``: during a start."""

    kind: ExitKind
    at: datetime
    code: int | None = None  # EXITED
    signal: int | None = None  # KILLED: the signal's number
    signal_name: str | None = None  # KILLED: its name where the system gave one ("SIGKILL")
    starting: bool = False
    deadline_s: float | None = None  # NOT_READY
    reason: str | None = None  # NOT_STARTED

    def __attrs_post_init__(self) -> None:
        require_aware(self.at, "an exit's time")
        for kind, value in (
            (ExitKind.EXITED, self.code),
            (ExitKind.KILLED, self.signal),
            (ExitKind.NOT_READY, self.deadline_s),
            (ExitKind.NOT_STARTED, self.reason),
        ):
            if (self.kind is kind) != (value is not None):
                raise ValueError(f"an exit of kind {kind.value} has its detail, and only it")
        if self.signal is not None and self.signal <= 0:
            raise ValueError(f"a signal's number is positive, got {self.signal}")
        if self.signal_name is not None and self.signal is None:
            raise ValueError("a signal name belongs to a kill")

    @classmethod
    def exited(cls, code: int, at: datetime, *, starting: bool = False) -> ServerExit:
        return cls(kind=ExitKind.EXITED, at=at, code=code, starting=starting)

    @classmethod
    def killed(
        cls, signal: int, name: str | None, at: datetime, *, starting: bool = False
    ) -> ServerExit:
        return cls(kind=ExitKind.KILLED, at=at, signal=signal, signal_name=name, starting=starting)

    @classmethod
    def unknown(cls, at: datetime) -> ServerExit:
        return cls(kind=ExitKind.UNKNOWN, at=at)

    @classmethod
    def not_ready(cls, deadline_s: float, at: datetime) -> ServerExit:
        return cls(kind=ExitKind.NOT_READY, at=at, deadline_s=deadline_s, starting=True)

    @classmethod
    def not_started(cls, reason: str, at: datetime) -> ServerExit:
        return cls(kind=ExitKind.NOT_STARTED, at=at, reason=reason, starting=True)


def exit_words(e: ServerExit) -> str:
    """How the model server ended, as a clause: "its model server exited with code 1 at ..."."""
    when = clock_time(e.at)
    starting = " while starting" if e.starting else ""
    match e.kind:
        case ExitKind.EXITED:
            return f"its model server exited with code {e.code}{starting} at {when}"
        case ExitKind.KILLED:
            name = f" ({e.signal_name})" if e.signal_name else ""
            return f"its model server was killed by signal {e.signal}{name}{starting} at {when}"
        case ExitKind.UNKNOWN:
            return f"its model server's process was found gone at {when} (exit status unknown)"
        case ExitKind.NOT_READY:
            return (
                f"its model server was not ready within {e.deadline_s:g} s of starting"
                f" and was stopped at {when}"
            )
        case ExitKind.NOT_STARTED:
            return f"its model server could not be started at {when} ({e.reason})"
    raise AssertionError(f"unknown exit kind {e.kind}")  # pragma: no cover


@frozen(kw_only=True)
class Recovery:
    """One recovery: from the machine that stopped answering onto another, when, and why."""

    from_machine: str
    to_machine: str
    at: datetime
    unreachable_since: datetime
    after: timedelta  # the delay the workload was set to

    def __attrs_post_init__(self) -> None:
        require_aware(self.at, "a recovery's time")
        require_aware(self.unreachable_since, "unreachable_since")
        if self.from_machine == self.to_machine:
            raise ValueError("a workload recovers onto another machine")
        if self.at < self.unreachable_since + self.after:
            raise ValueError("a recovery is never made before its delay has passed")

    @property
    def sentence(self) -> str:
        """What happened, for ``nodeau recovery status``."""
        return (
            f"moved from {self.from_machine} to {self.to_machine} at {clock_time(self.at)}: "
            f"{self.from_machine} was unreachable since {clock_time(self.unreachable_since)}, "
            f"longer than its delay of {delay_words(self.after)}"
        )


def delay_words(delay: timedelta) -> str:
    """A recovery delay as a person set it: ``3m``, ``90s``, ``1h``."""
    seconds = int(delay.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def recovery_words(mode: RecoveryMode, after: timedelta) -> str:
    """A recovery choice as a person reads it: ``automatic after 3m`` or ``never``."""
    if mode is RecoveryMode.NEVER:
        return "never"
    return f"automatic after {delay_words(after)}"


@frozen(kw_only=True)
class Workload:
    """One workload on one card: what it runs, where, in which state since when."""

    name: str
    kind: WorkloadKind
    model: str
    artifact_id: str
    machine: str
    gpu_uuid: str
    state: WorkloadState
    since: datetime
    recovery_mode: RecoveryMode = RecoveryMode.NEVER
    recovery_after: timedelta = timedelta(minutes=3)
    held_reason: HeldReason | None = None
    next_step: str | None = None
    # its recoveries: how many moves onto another machine were made (the number of the
    # server instance it runs now) and the latest, which a recovering workload is in
    recoveries: int = 0
    last_recovery: Recovery | None = None
    # its model server's restarts: how many were made, the latest end, when the next one is
    # due (restarting) and how many ends came in a row without a long enough run (the
    # back-off's step); records written before restarts existed read as none
    restarts: int = 0
    last_exit: ServerExit | None = None
    next_attempt: datetime | None = None
    crash_streak: int = 0
    # asked with --cpu: its card is held for it, and its model runs on the CPU all the same
    on_cpu: bool = False
    # every name its artifact went by when it was admitted (aliases, catalog names): what
    # its endpoint answers a request's "model" to besides the workload's name and model
    names: tuple[str, ...] = ()
    # split across cards of its machine: the cards after ``gpu_uuid`` in slot order, and
    # every card's whole slot count (``--tensor-split``); empty: it holds one card
    more_cards: tuple[str, ...] = ()
    tensor_split: tuple[int, ...] = ()

    def __attrs_post_init__(self) -> None:
        workload_invariants(self)

    @property
    def cards(self) -> tuple[str, ...]:
        """Every card it holds, in slot order (one unless it is split)."""
        return (self.gpu_uuid, *self.more_cards)

    @property
    def split(self) -> tuple[tuple[str, int], ...]:
        """Each card of a split with its slot count, in slot order; empty: one card."""
        return tuple(zip(self.cards, self.tensor_split, strict=True)) if self.more_cards else ()


def workload_invariants(w: Workload) -> None:
    """Raise ValueError for a workload no controller could have recorded."""
    for what, text in (("name", w.name), ("machine", w.machine), ("gpu_uuid", w.gpu_uuid)):
        if not text.strip():
            raise ValueError(f"a workload needs a {what}")
    require_aware(w.since, "since")
    if len(set(w.cards)) < len(w.cards):
        raise ValueError(f"workload {w.name} names a card twice")
    if w.more_cards and (len(w.tensor_split) != len(w.cards) or min(w.tensor_split) <= 0):
        raise ValueError(f"workload {w.name}'s split gives every one of its cards slots")
    if w.tensor_split and not w.more_cards:
        raise ValueError(f"workload {w.name} holds one card and has no split")
    if w.recovery_after <= timedelta(0):
        raise ValueError(f"recovery_after must be positive, got {w.recovery_after}")
    if w.next_step is not None and not w.next_step.strip():
        raise ValueError("next_step, when given, says something")
    if w.state is WorkloadState.SERVING and w.kind is not WorkloadKind.SERVICE:
        raise ValueError("only a service serves")
    if w.state is WorkloadState.RUNNING and w.kind is not WorkloadKind.BATCH:
        raise ValueError("only a batch job runs")
    if w.kind is WorkloadKind.BATCH and w.recovery_mode is not RecoveryMode.NEVER:
        raise ValueError("recovery applies to served workloads, not batch jobs")
    if (w.state is WorkloadState.HELD) != (w.held_reason is not None):
        raise ValueError("a held workload has a held_reason, and only a held one")
    if w.held_reason is not None and HELD_REASON_FITS[w.held_reason] != (
        w.kind,
        w.recovery_mode,
    ):
        kind, mode = HELD_REASON_FITS[w.held_reason]
        raise ValueError(
            f"held reason {w.held_reason.value} needs a {kind.value} set to {mode.value}"
        )
    if w.state is WorkloadState.RECOVERING and (
        w.last_recovery is None or w.last_recovery.to_machine != w.machine
    ):
        raise ValueError("a recovering workload has a last recovery onto its machine")
    if (w.recoveries == 0) != (w.last_recovery is None):
        raise ValueError("a workload that recovered has its last recovery, and only one")
    if w.restarts < 0 or w.crash_streak < 0 or w.recoveries < 0:
        raise ValueError("restarts, crash_streak and recoveries count, from 0")
    if w.next_attempt is not None:
        require_aware(w.next_attempt, "next_attempt")
    if w.state is WorkloadState.RESTARTING and (w.last_exit is None or w.next_attempt is None):
        raise ValueError("a restarting workload has a last_exit and a next_attempt")
    if w.state is WorkloadState.EXITED and w.last_exit is None:
        raise ValueError("an exited workload has a last_exit")


def holds_gpu(state: WorkloadState) -> bool:
    """Whether a workload in this state holds its card's reservation."""
    return state not in FINISHED


def short_gpu(uuid: str) -> str:
    """A card's UUID shortened for a sentence: ``GPU-1a2b…``."""
    return uuid if len(uuid) <= 8 else uuid[:8] + "…"


def short_age(age: timedelta) -> str:
    """An age as one unit, rounded down: ``45s``, ``4m``, ``2h``, ``3d`` (negative: ``0s``)."""
    seconds = max(0, int(age.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def next_clause(w: Workload) -> str:
    """What happens next for this workload, as the end of its ``nodeau ps`` sentence."""
    if w.next_step is not None:
        return w.next_step
    if w.held_reason is not None:
        return _held_next(w, w.held_reason)
    if w.state is WorkloadState.RESTARTING:
        return _restarting_next(w)
    if w.state is WorkloadState.EXITED:
        return _exited_next(w)
    serves = "serves" if w.kind is WorkloadKind.SERVICE else "runs"
    return {
        WorkloadState.ADMITTED: "it starts once its image and model files are ready",
        WorkloadState.STARTING: f"it {serves} once its model has loaded",
        WorkloadState.SERVING: "nothing to do",
        WorkloadState.RUNNING: "it finishes when its last request is done",
        WorkloadState.RECOVERING: "loading its model there, and its endpoint stays the same",
    }.get(w.state, "its card is free")


def start_interrupted(w: Workload, server_pid: int | None) -> Workload:
    """The workload as ``nodeau ps`` shows it when the command starting its model server
    ended before the model answered (killed): its card stays held until it is stopped."""
    left = (
        f"its model server (pid {server_pid}) may still run"
        if server_pid is not None
        else "no model server was recorded for it"
    )
    return evolve(
        w,
        next_step=f"its start was interrupted (the nodeau run starting it ended); {left}: "
        f"nodeau stop {w.name} --workload ends it and frees the card",
    )


def endpoint_stopped(w: Workload) -> Workload:
    """The workload as ``nodeau ps`` shows it when its endpoint does not listen: a service
    loaded (or being restarted) with nothing in front of it; any other is shown as it is."""
    if w.kind is not WorkloadKind.SERVICE:
        return w
    if w.state is WorkloadState.SERVING:
        return evolve(w, next_step=f"loaded, endpoint stopped; nodeau run {w.name} brings it back")
    if w.state in (WorkloadState.RESTARTING, WorkloadState.EXITED):
        return evolve(
            w,
            next_step=f"its endpoint is stopped, so nothing restarts it; nodeau run {w.name} "
            "brings the endpoint back, which starts the model server again",
        )
    return w


def _restarting_next(w: Workload) -> str:
    assert w.next_attempt is not None and w.last_exit is not None
    clause = f"restart {w.restarts + 1}, next attempt at {clock_time(w.next_attempt)}"
    if w.last_exit.starting:
        clause += f" (nodeau logs {w.name} shows its log)"
    return clause


def _exited_next(w: Workload) -> str:
    if w.kind is WorkloadKind.SERVICE:
        return (
            f"its endpoint restarts it if it runs; if not, nodeau run {w.name}"
            " starts the endpoint again"
        )
    return (
        f"its batch worker restarts it if it runs; if not, nodeau batch stop {w.name}"
        " frees the card"
    )


def _restarted_words(w: Workload) -> str:
    """ ", restarted once after its model server ..." for a workload up again, else ""."""
    if w.restarts == 0 or w.last_exit is None:
        return ""
    if w.state not in (WorkloadState.SERVING, WorkloadState.RUNNING):
        return ""
    times = "once" if w.restarts == 1 else f"{w.restarts} times, last"
    return f", restarted {times} after {exit_words(w.last_exit)}"


def _held_next(w: Workload, reason: HeldReason) -> str:
    return {
        HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF: (
            f"recovery is off, so it waits for {w.machine}"
        ),
        HeldReason.WAITING_FOR_DELAY: (
            f"recovers automatically at {clock_time(w.since + w.recovery_after)}"
            " onto another machine"
        ),
        HeldReason.ON_CONTROL_PLANE_MACHINE: (
            f"{w.machine} is the control-plane machine, so it waits for {w.machine}"
        ),
        HeldReason.BATCH_JOB: f"batch jobs do not recover, it waits for {w.machine}",
        HeldReason.MODEL_FILES: (
            "a machine that could run it fetches a verified copy (a model you imported:"
            " import it there), and it moves once that machine has checked every file"
        ),
        HeldReason.CAPACITY: "it starts when one frees (no retries)",
        HeldReason.LIMITS: (
            "it moves once the organisation's limits or the plan let it run on a machine that"
            " can take it (nodeau plan explain says which; no retries until then)"
        ),
        HeldReason.FLEET_QUIET: (
            "nothing moves while more than half of the fleet is quiet at once"
            " (Nodeau suspects the network or itself, not the machines)"
        ),
    }[reason]


HELD_CAUSE_DETAIL = {
    HeldReason.MODEL_FILES: " and no other machine has a verified copy",
    HeldReason.CAPACITY: " and no other machine has a free card that fits",
    HeldReason.LIMITS: " and the organisation's limits or the plan stand in the way",
    HeldReason.FLEET_QUIET: ", with most of the fleet",
}


def ps_sentence(w: Workload, now: datetime) -> str:
    """The one sentence ``nodeau ps`` prints: which machine, since when, what happens next."""
    require_aware(now, "now")
    when = f"{clock_time(w.since)} ({short_age(now - w.since)})"
    if w.held_reason is not None:
        cause = f"{w.machine} stopped answering{HELD_CAUSE_DETAIL.get(w.held_reason, '')}"
        return f"held since {when}: {cause}; {next_clause(w)}"
    cards = ", ".join(short_gpu(c) for c in w.cards)
    where = f"{w.machine} ({cards}{', the model on the CPU' if w.on_cpu else ''})"
    if w.state is WorkloadState.RECOVERING:
        assert w.last_recovery is not None  # workload_invariants
        return (
            f"recovering on {where} since {when}:"
            f" {w.last_recovery.from_machine} stopped answering; {next_clause(w)}"
        )
    if w.state in (WorkloadState.RESTARTING, WorkloadState.EXITED):
        assert w.last_exit is not None  # workload_invariants
        ended = exit_words(w.last_exit)
        return f"{w.state.value} on {where} since {when}: {ended}; {next_clause(w)}"
    return f"{w.state.value} on {where} since {when}{_restarted_words(w)}; {next_clause(w)}"
