"""Copies of a model kept on machines of a fleet: who asks for one, and the state it is in.

Why it is so: docs/adr/decisions/domain.md (copies.py).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from attrs import Attribute, evolve, field, frozen

from nodeau.domain.artifacts import is_sha256_hex
from nodeau.domain.checks import aware, not_negative
from nodeau.domain.resolution import SHORT_ID

PERSON = "person"
RECOVERY_PREFIX = "recovery:"
TRIES_WITHOUT_PROGRESS = 3


def recovery_asker(workload: str) -> str:
    """The asker a workload's recovery asks as."""
    return f"{RECOVERY_PREFIX}{workload}"


def asker_problem(asker: str) -> str | None:
    """Why ``asker`` is not one (``person`` or ``recovery:<workload>``); None when it is."""
    if asker == PERSON:
        return None
    workload = asker.removeprefix(RECOVERY_PREFIX)
    if asker.startswith(RECOVERY_PREFIX) and workload.strip() and workload == workload.strip():
        return None
    return f"an asker is {PERSON!r} or '{RECOVERY_PREFIX}<workload>', got {asker!r}"


def asker_words(asker: str) -> str:
    """An asker as a sentence names it."""
    if asker == PERSON:
        return "a person"
    return f"the recovery of {asker.removeprefix(RECOVERY_PREFIX)}"


def _an_artifact(_instance: object, attribute: Attribute[Any], value: str) -> None:
    if not is_sha256_hex(value):
        raise ValueError(f"{attribute.name} is an artifact id (64 lowercase hex), got {value!r}")


def _an_asker(_instance: object, _attribute: Attribute[Any], value: str) -> None:
    if (problem := asker_problem(value)) is not None:
        raise ValueError(problem)


def _a_name(_instance: object, attribute: Attribute[Any], value: str) -> None:
    if not value.strip():
        raise ValueError(f"{attribute.name} must not be blank")


# -- requests ------------------------------------------------------------------------------------


@frozen(kw_only=True)
class Ask:
    """One asker's ask, and when it was made."""

    asker: str = field(validator=_an_asker)
    at: datetime = field(validator=aware)


def _askers(_instance: object, _attribute: Attribute[Any], value: tuple[Ask, ...]) -> None:
    names = [a.asker for a in value]
    if not names:
        raise ValueError("a copy request is held by at least one asker")
    if names != sorted(set(names)):
        raise ValueError(f"a request's askers are listed once each, in order: {names}")


@frozen(kw_only=True)
class CopyRequest:
    """A machine asked to keep a verified copy of an artifact, by whom, since when."""

    machine: str = field(validator=_a_name)
    artifact: str = field(validator=_an_artifact)  # SHA-256 hex of the artifact
    name: str = field(validator=_a_name)  # the model as it was first asked for
    since: datetime = field(validator=aware)  # when this request was made
    askers: tuple[Ask, ...] = field(validator=_askers)

    @property
    def key(self) -> tuple[str, str]:
        return (self.machine, self.artifact)

    def asked_by(self, asker: str) -> bool:
        return any(a.asker == asker for a in self.askers)

    @property
    def recoveries(self) -> tuple[str, ...]:
        """The workloads whose recovery relies on this copy."""
        return tuple(
            a.asker.removeprefix(RECOVERY_PREFIX)
            for a in self.askers
            if a.asker.startswith(RECOVERY_PREFIX)
        )


def find_request(
    requests: Iterable[CopyRequest], machine: str, artifact: str
) -> CopyRequest | None:
    """The request for that artifact on that machine, if any."""
    return next((r for r in requests if r.key == (machine, artifact)), None)


def _in_order(requests: Iterable[CopyRequest]) -> tuple[CopyRequest, ...]:
    return tuple(sorted(requests, key=lambda r: r.key))


def with_ask(
    requests: Sequence[CopyRequest],
    *,
    machine: str,
    artifact: str,
    name: str,
    asker: str,
    at: datetime,
) -> tuple[CopyRequest, ...]:
    """The requests once ``asker`` asked ``machine`` for a copy of ``artifact`` at ``at``.

    A new request is made if there was none (``since`` is ``at``); another asker joins
    an existing one, whose name and moment stay; an asker asking again changes nothing.
    """
    found = find_request(requests, machine, artifact)
    if found is not None and found.asked_by(asker):
        return _in_order(requests)
    ask = Ask(asker=asker, at=at)
    if found is None:
        made = CopyRequest(machine=machine, artifact=artifact, name=name, since=at, askers=(ask,))
    else:
        made = evolve(found, askers=tuple(sorted((*found.askers, ask), key=lambda a: a.asker)))
    return _in_order([*(r for r in requests if r.key != made.key), made])


def without_ask(
    requests: Sequence[CopyRequest], *, machine: str, artifact: str, asker: str
) -> tuple[CopyRequest, ...]:
    """The requests once ``asker`` took its ask back: the request goes with its last asker."""
    kept: list[CopyRequest] = []
    for request in requests:
        if request.key != (machine, artifact) or not request.asked_by(asker):
            kept.append(request)
            continue
        left = tuple(a for a in request.askers if a.asker != asker)
        if left:
            kept.append(evolve(request, askers=left))
    return _in_order(kept)


@frozen(kw_only=True)
class Withdrawal:
    """What taking an ask back did, and the sentence that says so."""

    before: CopyRequest | None
    after: CopyRequest | None
    sentence: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def withdrawal(request: CopyRequest | None, *, asker: str, machine: str, name: str) -> Withdrawal:
    """What taking ``asker``'s ask for a copy of ``name`` on ``machine`` back does."""
    nothing_deleted = "no file is deleted"
    if request is None:
        return Withdrawal(
            before=None,
            after=None,
            sentence=f"no copy of {name} is asked of {machine}; nothing to take back",
        )
    others = [a.asker for a in request.askers if a.asker != asker]
    held_by = ", ".join(asker_words(a) for a in others)
    if not request.asked_by(asker):
        return Withdrawal(
            before=request,
            after=request,
            sentence=f"{asker_words(asker)} did not ask {machine} for a copy of {name}; "
            f"it stays, asked by {held_by}",
        )
    after = find_request(
        without_ask([request], machine=machine, artifact=request.artifact, asker=asker),
        machine,
        request.artifact,
    )
    if after is None:
        sentence = (
            f"the copy of {name} on {machine} is no longer asked for: its agent stops "
            f"fetching it if it was, and {nothing_deleted} (what {machine} verified stays there)"
        )
    elif after.recoveries:
        relies = ", ".join(after.recoveries)
        sentence = (
            f"your ask for a copy of {name} on {machine} is taken back, but the copy stays: "
            f"the recovery of {relies} relies on it; {nothing_deleted}"
        )
    else:
        sentence = (
            f"your ask for a copy of {name} on {machine} is taken back; it stays, asked by "
            f"{held_by}; {nothing_deleted}"
        )
    return Withdrawal(before=request, after=after, sentence=sentence)


# -- what an agent reports -----------------------------------------------------------------------


class CopyPhase(str, enum.Enum):
    """Where a machine's agent is with one request, as its report says."""

    WAITING = "waiting"  # behind another fetch on that machine
    FETCHING = "fetching"
    VERIFYING = "verifying"  # every byte arrived; the SHA-256 decides
    FAILED = "failed"  # not retried until the request is made again
    NOT_FETCHED = "not-fetched"  # no publisher to fetch it from (an imported model)


@frozen(kw_only=True)
class CopyProgress:
    """One request as a machine's agent last reported it."""

    artifact: str = field(validator=_an_artifact)
    since: datetime = field(validator=aware)  # the ``since`` of the request it answers
    phase: CopyPhase
    bytes_done: int = field(default=0, validator=not_negative)
    bytes_total: int = field(default=0, validator=not_negative)
    reason: str = ""  # waiting: behind what; failed: why; fetching: the interruption resumed


def imported_sentence(machine: str) -> str:
    """What a copy of an imported model on ``machine`` needs (it is never fetched)."""
    return (
        f"imported models are never fetched: run nodeau models import FILE --no-register "
        f"on {machine}; it counts as a copy once verified there"
    )


def waiting_behind(name: str) -> str:
    """Why a request waits while the agent fetches ``name``."""
    return f"waiting behind {name}: one fetch at a time on this machine"


def next_fetch(
    requests: Iterable[CopyRequest],
    *,
    fetchable: Collection[str],
    verified: Collection[str],
    failed: Collection[tuple[str, datetime]],
) -> CopyRequest | None:
    """The request an agent fetches next: the oldest it can fetch that is neither held
    verified nor failed (``failed`` holds (artifact, since) of requests that failed)."""
    candidates = [
        r
        for r in requests
        if r.artifact in fetchable
        and r.artifact not in verified
        and (r.artifact, r.since) not in failed
    ]
    return min(candidates, key=lambda r: (r.since, r.artifact), default=None)


def resume_fetch(tries_without_progress: int) -> bool:
    """Whether an interrupted fetch is tried again, after this many tries in a row that
    moved no byte (a try that moved bytes resets the count to 0)."""
    return tries_without_progress < TRIES_WITHOUT_PROGRESS


# -- the state a copy is shown in ----------------------------------------------------------------


class CopyState(str, enum.Enum):
    """A copy as ``nodeau models copies`` shows it."""

    REQUESTED = "requested"
    WAITING = "waiting"
    FETCHING = "fetching"
    VERIFYING = "verifying"
    READY = "ready"
    FAILED = "failed"


@frozen(kw_only=True)
class MachineCopies:
    """What a machine's latest report says of its copies: the artifacts it holds verified
    (with the names it knows them by) and its progress on each request."""

    machine: str
    at: datetime = field(validator=aware)
    verified: Mapping[str, tuple[str, ...]]
    progress: tuple[CopyProgress, ...] = ()


@frozen(kw_only=True)
class CopyStatus:
    """One copy as a person reads it: where, of what, its state, who asked."""

    machine: str
    artifact: str
    name: str
    state: CopyState
    sentence: str
    bytes_done: int | None
    bytes_total: int | None
    askers: tuple[str, ...]  # empty: no one asked (pulled or imported on that machine)
    requested_at: datetime | None
    reported_at: datetime | None  # the report the state is read from; None: none yet

    @property
    def settled(self) -> bool:
        """Ready or failed: nothing more happens to it without someone asking."""
        return self.state in (CopyState.READY, CopyState.FAILED)


def _percent(done: int, total: int) -> int:
    return 100 if total <= 0 else min(100, done * 100 // total)


def _progress_state(request: CopyRequest, progress: CopyProgress) -> tuple[CopyState, str]:
    machine, name = request.machine, request.name
    match progress.phase:
        case CopyPhase.WAITING:
            return CopyState.WAITING, progress.reason or waiting_behind("another fetch")
        case CopyPhase.FETCHING:
            resumed = f"; resumed after {progress.reason}" if progress.reason else ""
            arrived = _percent(progress.bytes_done, progress.bytes_total)
            return (
                CopyState.FETCHING,
                f"fetching from the model's publisher: {arrived}% arrived{resumed}",
            )
        case CopyPhase.VERIFYING:
            return (
                CopyState.VERIFYING,
                "every byte arrived; each file's SHA-256 is checked before it counts",
            )
        case CopyPhase.FAILED:
            return (
                CopyState.FAILED,
                f"{progress.reason}; not retried: take the request back (nodeau models copy "
                f"{name} --to {machine} --remove) and ask again",
            )
        case CopyPhase.NOT_FETCHED:
            return CopyState.REQUESTED, progress.reason or imported_sentence(machine)
    raise AssertionError(f"unknown phase {progress.phase}")


def copy_status(request: CopyRequest, report: MachineCopies | None) -> CopyStatus:
    """The state of a requested copy, from the machine's latest report (None: none yet)."""
    askers = tuple(a.asker for a in request.askers)
    done: int | None = None
    total: int | None = None
    if report is None:
        state = CopyState.REQUESTED
        sentence = f"{request.machine} has not reported yet; its agent takes the request up"
    elif request.artifact in report.verified:
        state = CopyState.READY
        sentence = f"verified on {request.machine}: every file's SHA-256 checked there"
    else:
        progress = next(
            (
                p
                for p in report.progress
                if p.artifact == request.artifact and p.since == request.since
            ),
            None,
        )
        if progress is None:
            state = CopyState.REQUESTED
            sentence = f"{request.machine}'s agent takes the request up at its next round"
        else:
            state, sentence = _progress_state(request, progress)
            if progress.bytes_total > 0:
                done, total = progress.bytes_done, progress.bytes_total
    return CopyStatus(
        machine=request.machine,
        artifact=request.artifact,
        name=request.name,
        state=state,
        sentence=sentence,
        bytes_done=done,
        bytes_total=total,
        askers=askers,
        requested_at=request.since,
        reported_at=None if report is None else report.at,
    )


def held_copy(report: MachineCopies, artifact: str) -> CopyStatus:
    """A verified artifact no one asked for (pulled or imported there): a ready copy."""
    names = report.verified[artifact]
    return CopyStatus(
        machine=report.machine,
        artifact=artifact,
        name=names[0] if names else artifact[:SHORT_ID],
        state=CopyState.READY,
        sentence=f"verified on {report.machine} (pulled or imported there; no one asked for it)",
        bytes_done=None,
        bytes_total=None,
        askers=(),
        requested_at=None,
        reported_at=report.at,
    )


def copy_statuses(
    requests: Iterable[CopyRequest], reports: Iterable[MachineCopies]
) -> tuple[CopyStatus, ...]:
    """Every copy: each request in its state, and each verified artifact no one asked for;
    by machine, then model name."""
    by_machine = {r.machine: r for r in reports}
    asked = tuple(requests)
    keys = {r.key for r in asked}
    shown = [copy_status(r, by_machine.get(r.machine)) for r in asked]
    shown += [
        held_copy(report, artifact)
        for report in by_machine.values()
        for artifact in report.verified
        if (report.machine, artifact) not in keys
    ]
    return tuple(sorted(shown, key=lambda c: (c.machine, c.name, c.artifact)))


def asked_sentence(status: CopyStatus, *, already: bool, fetchable: bool, short_id: str) -> str:
    """What ``nodeau models copy`` says once the ask is recorded (``already``: this asker
    had asked before; ``fetchable``: the model has a publisher to fetch it from)."""
    what = f"a copy of {status.name} ({short_id}) on {status.machine}"
    if already:
        return f"{what} was already asked for; it is {status.state.value}: {status.sentence}"
    if status.state is CopyState.READY:
        return f"{what} is asked for; it is verified there already, nothing to fetch"
    if not fetchable:
        return f"{what} is asked for; {imported_sentence(status.machine)}"
    return (
        f"{what} is asked for: its agent fetches it from the model's publisher and checks "
        "every file's SHA-256 before it counts (nodeau models copies shows how it goes)"
    )
