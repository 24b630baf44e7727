"""What ``nodeau run`` does with a name: admit a new workload, or bring an endpoint back.

Why it is so: docs/adr/decisions/domain.md (runs.py).
"""

from __future__ import annotations

import re
from datetime import timedelta

from attrs import frozen

from nodeau.domain.records import WorkloadRecord
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import (
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
    delay_words,
    holds_gpu,
)

NAME_SHAPE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a workload, or None."""
    if NAME_SHAPE.match(name) is None:
        return (
            f"{name!r}: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit (at most 253 characters)"
        )
    return None


def name_from_model(model: str) -> str | None:
    """A valid workload name made from a model's name; None when nothing is left of it."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", model.lower()).strip("-.")[:253].strip("-.")
    return cleaned if cleaned and name_problem(cleaned) is None else None


@frozen(kw_only=True)
class Admit:
    """No workload holds the name: admit a new one."""


@frozen(kw_only=True)
class EndpointBack:
    """It already serves this artifact: bring its endpoint back, admit nothing."""

    workload: Workload


@frozen(kw_only=True)
class NameTaken:
    """Another workload holds the name."""

    sentence: str


@frozen(kw_only=True)
class Asked:
    """The flags of ``nodeau run`` a person gave beyond the model (None: not given, which
    for a workload that exists means "as it is")."""

    context_tokens: int | None = None
    task: Task | None = None
    recovery: RecoveryMode | None = None
    recovery_after: timedelta | None = None
    on_cpu: bool | None = None


@frozen(kw_only=True)
class RunsWith:
    """What a workload that exists runs with, in the terms of ``nodeau run``'s flags."""

    context_tokens: int | None  # None: not known yet (a fleet workload not decided)
    task: Task
    recovery: RecoveryMode
    recovery_after: timedelta
    on_cpu: bool = False
    # the origins its endpoint answers while it runs; None: its endpoint is stopped, so it
    # starts with the origins asked
    allowed_origins: tuple[str, ...] | None = None


@frozen(kw_only=True)
class NotAsAsked:
    """It serves, with something other than what was asked: nothing is changed."""

    sentence: str


def run_step(
    existing: Workload | None,
    *,
    artifact_id: str,
    asked: Asked = Asked(),
    origins: tuple[str, ...] = (),
    runs_with: RunsWith | None = None,
) -> Admit | EndpointBack | NameTaken | NotAsAsked:
    """What running a service under an existing name does; with ``runs_with``, a run that
    would bring its endpoint back is first compared with ``asked`` and ``origins``
    (``--allow-origin``, () when none is given)."""
    step = _name_step(existing, artifact_id=artifact_id)
    if isinstance(step, EndpointBack) and runs_with is not None:
        sentence = differences(step.workload.name, asked, origins, runs_with)
        if sentence is not None:
            return NotAsAsked(sentence=sentence)
    return step


def runs_with(record: WorkloadRecord, allowed_origins: tuple[str, ...] | None) -> RunsWith:
    """What the workload of ``record`` runs with; ``allowed_origins``: its running endpoint's
    (None: its endpoint is stopped)."""
    w = record.workload
    return RunsWith(
        context_tokens=record.config.context_tokens,
        task=record.config.task,
        recovery=w.recovery_mode,
        recovery_after=w.recovery_after,
        on_cpu=w.on_cpu,
        allowed_origins=allowed_origins,
    )


def differences(name: str, asked: Asked, origins: tuple[str, ...], now: RunsWith) -> str | None:
    """The sentence refusing a run of ``name`` whose given flags differ from what it runs
    with, naming each and how to change it; None when every flag given is as it is."""
    was: list[str] = []
    wanted: list[str] = []
    how: list[str] = []
    if asked.context_tokens is not None and now.context_tokens not in (None, asked.context_tokens):
        was.append(f"--context {now.context_tokens}")
        wanted.append(f"--context {asked.context_tokens}")
    if asked.task is not None and asked.task is not now.task:
        was.append(f"--task {now.task.value}")
        wanted.append(f"--task {asked.task.value}")
    if asked.on_cpu is not None and asked.on_cpu != now.on_cpu:
        was.append(_cpu_words(now.on_cpu))
        wanted.append(_cpu_words(asked.on_cpu))
    if was:
        how.append(
            "a model server keeps what it was started with: stop it with "
            f"nodeau stop {name} --workload and run it again with those (or give another --name)"
        )
    then = _recovery_flags(now.recovery, now.recovery_after)
    chosen = _recovery_flags(
        asked.recovery or now.recovery, asked.recovery_after or now.recovery_after
    )
    if (asked.recovery is not None or asked.recovery_after is not None) and chosen != then:
        was.append(then)
        wanted.append(chosen)
        set_to = chosen.removeprefix("--recovery ")
        how.append(f"nodeau recovery set {name} {set_to} changes its recovery, with no restart")
    if origins and now.allowed_origins is not None and origins != now.allowed_origins:
        was.append(_origin_words(now.allowed_origins))
        wanted.append(_origin_words(origins))
        how.append(
            f"its endpoint answers the same pages while it runs: nodeau stop {name} stops it "
            f"(the model stays loaded) and nodeau run {name} with those starts it again"
        )
    if not was:
        return None
    return (
        f"{name} already serves with {_and(was)}, not {_and(wanted)} as asked, and nothing "
        f"was changed; {'; '.join(how)}"
    )


def _cpu_words(on_cpu: bool) -> str:
    return "--cpu" if on_cpu else "no --cpu"


def _recovery_flags(mode: RecoveryMode, after: timedelta) -> str:
    if mode is RecoveryMode.NEVER:
        return "--recovery never"
    return f"--recovery automatic --after {delay_words(after)}"


def _origin_words(origins: tuple[str, ...]) -> str:
    if not origins:
        return "no --allow-origin"
    return " ".join(f"--allow-origin {o}" for o in origins)


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _name_step(existing: Workload | None, *, artifact_id: str) -> Admit | EndpointBack | NameTaken:
    if existing is None or not holds_gpu(existing.state):
        return Admit()
    name = existing.name
    if existing.kind is not WorkloadKind.SERVICE:
        return NameTaken(
            sentence=f"{name} is a batch job holding a card; give another --name "
            f"or stop it with nodeau batch stop {name}"
        )
    if existing.artifact_id != artifact_id:
        return NameTaken(
            sentence=f"{name} already serves {existing.model} ({existing.artifact_id[:12]}); "
            f"give another --name or stop it with nodeau stop {name} --workload"
        )
    if existing.state in (WorkloadState.SERVING, WorkloadState.RESTARTING):
        # loaded, or being started again by its endpoint: bring the endpoint back
        return EndpointBack(workload=existing)
    return NameTaken(
        sentence=f"{name} is {existing.state.value}, not serving yet; nodeau ps shows when "
        f"it serves, or stop it with nodeau stop {name} --workload"
    )
