"""A workload's life once admitted: what its model server's state makes of the workload's.

Every plane watches a model server (a Pod in a cluster, a ``llama-server``
process on one machine) and moves the workload it serves with the same rules,
so the phases below name what a server does, not how a plane runs it.

Decisions recorded here:

* A workload that holds no card (succeeded, failed, stopped) never moves again.
* A held or recovering workload is recovery's to move (``nodeau.domain.recovery``),
  never its server's: its machine stopped answering, and what its server looks
  like from there cannot be trusted. Nor can any server's on an unreachable
  machine: until health holds the workload, it stays as it is.
* A server being deleted moves nothing: deletion decides what comes next.
* No server: the workload starts (a server is made for it). One that exists but
  does not answer yet: an admitted workload is starting. One that answers: a
  starting service serves, a starting batch job runs.
* A serving service or running batch job whose server stops answering for a
  while (a busy server's health check) stays as it is; only an exit counts.
* A batch job's server that exited has finished it: succeeded when it exited
  cleanly, failed otherwise, and its card is free again.
* A service's server that exited has died. Nothing here restarts it, so the
  service has failed and its card is free again; a restart policy would answer
  ``STARTING`` here (``RESTART_ON_EXIT`` says which it is today). In a cluster the
  kubelet restarts a service's container itself, so an exit it reports is final.
* A restarting workload (its supervisor starts its server again after a back-off,
  ``nodeau.domain.restarts``) is the supervisor's to move, except that a server
  that answers again makes it serve (or run) again; no server is made for it here.
  ``exited`` is only ever shown, never recorded, and moves nothing.
"""

from __future__ import annotations

import enum
from datetime import datetime

from attrs import evolve

from nodeau.domain.health import Health
from nodeau.domain.records import WorkloadRecord
from nodeau.domain.workloads import FINISHED, WorkloadKind, WorkloadState

RESTART_ON_EXIT = False  # a service whose server exits is failed, not restarted (not yet)


class ServerPhase(str, enum.Enum):
    """What a workload's model server is doing, whichever plane runs it."""

    ABSENT = "absent"  # there is none
    STARTING = "starting"  # it exists and does not answer yet (or answers no more)
    READY = "ready"  # it answers requests
    EXITED_OK = "exited-ok"  # it ended cleanly
    EXITED_FAILED = "exited-failed"  # it ended with an error (or was killed)
    DELETING = "deleting"  # it is being taken down


RECOVERY_STATES = frozenset({WorkloadState.HELD, WorkloadState.RECOVERING})
STARTED = frozenset({WorkloadState.ADMITTED, WorkloadState.STARTING})
SUPERVISED = frozenset({WorkloadState.RESTARTING, WorkloadState.EXITED})
EXITED = frozenset({ServerPhase.EXITED_OK, ServerPhase.EXITED_FAILED})


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
    match server:
        case ServerPhase.ABSENT:
            wanted = WorkloadState.STARTING
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


def needs_server(state: WorkloadState, server: ServerPhase, machine: Health | None) -> bool:
    """Whether a server should be made for the workload now (it holds its card, has none,
    and neither recovery nor an unreachable machine stands in the way)."""
    return (
        server is ServerPhase.ABSENT and state not in SUPERVISED and moved_by_server(state, machine)
    )


def with_state(record: WorkloadRecord, state: WorkloadState, at: datetime) -> WorkloadRecord:
    """The record in ``state`` since ``at``. A held reason and a recovery target belong to
    the held and recovering states and are dropped; the next step is the new state's."""
    w = evolve(
        record.workload,
        state=state,
        since=at,
        held_reason=None,
        target_machine=None,
        next_step=None,
    )
    return evolve(record, workload=w)
