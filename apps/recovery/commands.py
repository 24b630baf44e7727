"""What ``nodeau recovery`` shows and sets: the views and ``RecoveryCommands``.

The choice's meaning and sentence are the domain's (``recovery_change``); a view shows a
service's ``ps`` sentence only while it is held or recovering.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from attrs import frozen

from nodeau.domain.workloads import (
    Recovery,
    RecoveryMode,
    Workload,
    WorkloadKind,
    WorkloadState,
    ps_sentence,
    recovery_words,
)
from nodeau.ports.errors import NodeauError

SHOWN_NOW = frozenset({WorkloadState.HELD, WorkloadState.RECOVERING})


@frozen(kw_only=True)
class LastRecoveryView:
    """A service's latest recovery: from which machine onto which, when, and why."""

    from_machine: str
    to_machine: str
    at: datetime
    sentence: str


@frozen(kw_only=True)
class RecoveryView:
    """One service of ``nodeau recovery status``: its choice, its copies, its last recovery."""

    name: str
    machine: str | None
    state: str
    choice: str  # as a person reads it: "automatic after 3m", "never"
    mode: str  # "never" or "automatic"
    after_seconds: int
    copies: tuple[str, ...] | None  # machines holding a verified copy of its model
    last_recovery: LastRecoveryView | None
    sentence: str | None  # its ``ps`` sentence while it is held or recovering
    note: str | None  # what its choice can do on this plane, when that is less than it says


@frozen(kw_only=True)
class RecoveryListing:
    """``nodeau recovery status``: which plane, how the deciding machine is known, each
    service."""

    plane: str
    control_plane: str
    services: tuple[RecoveryView, ...]


class NotAService(NodeauError):
    """Recovery was asked of a batch job: recovery applies to served workloads."""


class RecoveryCommands(Protocol):
    """``nodeau recovery set|status`` on one plane."""

    def set_choice(self, name: str, mode: RecoveryMode, after: timedelta) -> str:
        """Choose what a service does when its machine stops answering; nothing restarts.
        The domain's sentence; ``NotAService`` for a batch job."""
        ...

    def status(self) -> RecoveryListing:
        """Every service's recovery choice, its copies and its last recovery."""
        ...


def refuse_batch(name: str, kind: WorkloadKind) -> None:
    """``NotAService`` for a batch job."""
    if kind is not WorkloadKind.SERVICE:
        raise NotAService(f"recovery applies to served workloads; {name} is a batch job")


def last_recovery_view(move: Recovery | None) -> LastRecoveryView | None:
    if move is None:
        return None
    return LastRecoveryView(
        from_machine=move.from_machine,
        to_machine=move.to_machine,
        at=move.at,
        sentence=move.sentence,
    )


def recovery_view(
    name: str,
    *,
    machine: str | None,
    state: str,
    choice: tuple[RecoveryMode, timedelta],
    copies: tuple[str, ...] | None,
    workload: Workload | None,
    now: datetime,
    note: str | None,
) -> RecoveryView:
    """One service's row; its ``ps`` sentence only while it is held or recovering."""
    mode, after = choice
    shown = workload is not None and workload.state in SHOWN_NOW
    return RecoveryView(
        name=name,
        machine=machine,
        state=state,
        choice=recovery_words(mode, after),
        mode=mode.value,
        after_seconds=int(after.total_seconds()),
        copies=copies,
        last_recovery=None if workload is None else last_recovery_view(workload.last_recovery),
        sentence=ps_sentence(workload, now) if shown and workload is not None else None,
        note=note,
    )
