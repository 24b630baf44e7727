"""GPUServices and BatchJobs as the apps read and write them: the object and its
conditions, the port that lists, creates and marks them, and the watch on them.

Why it is so: docs/adr/decisions/ports.md (cluster.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from attrs import field, frozen

from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.records import Admission, WorkloadRecord
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.workloads import RecoveryMode, WorkloadKind


@frozen(kw_only=True)
class Condition:
    """One condition a workload's status states (``Admitted``, ``Placed``, ``Ready``)."""

    type: str
    ok: bool
    reason: str
    message: str


def _text(value: object) -> str | None:
    """A status value that names something, as text (None when absent or empty)."""
    return str(value) if value else None


@frozen(kw_only=True)
class WorkloadObject:
    """A GPUService or BatchJob as read: what was asked, what was recorded, where it stands.

    ``spec`` and ``status`` are the object's JSON as docs/adr/0004 defines it, for
    commands that show it whole; ``ask`` and ``record`` are the same read into values
    (None when absent or unreadable).
    """

    kind: WorkloadKind
    name: str
    title: str  # how a message names it: "GPUService nodeau-system/chat"
    uid: str
    version: str  # the version read; a guarded write names it
    generation: int | None
    ask: WorkloadAsk | None
    record: WorkloadRecord | None
    spec: Mapping[str, Any] = field(factory=dict, eq=False)
    status: Mapping[str, Any] = field(factory=dict, eq=False)
    guarded: bool = False  # its reservation is released before it can go
    deleting: bool = False  # someone deleted it; it goes once unguarded

    @property
    def decided(self) -> bool:
        """Whether admission has decided on it (admitted it, or refused it)."""
        return bool(self.state)

    @property
    def refused(self) -> bool:
        """Whether admission said no to it (recorded by ``record_refusal``)."""
        return self.state == "refused"

    @property
    def endpoint(self) -> str:
        """The endpoint its status shows ("" for none)."""
        return str(self.status.get("endpoint") or "")

    @property
    def state(self) -> str:
        """The state its status shows ("" before admission decided)."""
        return str(self.status.get("state") or "")

    @property
    def machine(self) -> str | None:
        """The machine its status names (None: none yet)."""
        return _text(self.status.get("machine"))

    @property
    def gpu_uuid(self) -> str | None:
        """The card its status names (None: none yet)."""
        return _text(self.status.get("gpuUUID"))

    @property
    def sentence(self) -> str | None:
        """The sentence its status gives a person, if any."""
        return _text(self.status.get("sentence"))

    @property
    def reserved_bytes(self) -> int | None:
        """The bytes its admission reserved on its card, if admitted."""
        found = self.status.get("reservedBytes")
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    @property
    def source(self) -> str:
        """Whether its reservation was estimated or measured ("estimated" unless it says)."""
        return str(self.status.get("source") or "estimated")

    @property
    def packed_admission(self) -> str | None:
        """Its admission as the store packed it (None: none recorded)."""
        return _text(self.status.get("admission"))

    @property
    def refusal(self) -> Refusal | None:
        """The refusal the controller recorded in its status, if any."""
        raw = self.status.get("refusal")
        if not isinstance(raw, Mapping):
            return None
        return Refusal.of(ReasonCode(str(raw.get("code"))), str(raw.get("message")))

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type its status states, if any."""
        for c in self.status.get("conditions") or ():
            if c.get("type") == type_:
                return Condition(
                    type=type_,
                    ok=c.get("status") == "True",
                    reason=str(c.get("reason", "")),
                    message=str(c.get("message", "")),
                )
        return None


STORE_OWNED = frozenset({"record", "admission", "reservation"})  # the state store's to write


def check_status_fields(fields: Mapping[str, Any]) -> None:
    """ValueError when ``set_status`` is asked to write a field only the state store writes
    (its admit, update and release keep the ledger and the record in step)."""
    owned = STORE_OWNED & set(fields)
    if owned:
        raise ValueError(f"set_status may not write {', '.join(sorted(owned))}")


class WorkloadObjects(Protocol):
    """GPUServices and BatchJobs: what people ask for, and the status Nodeau shows on them.

    A GPUService and a BatchJob may share a name; methods taking a kind address one.
    The record and admission in a status are the state store's to write.
    """

    def list_all(self) -> tuple[WorkloadObject, ...]:
        """Every GPUService, then every BatchJob, each oldest first (then by name)."""
        ...

    def get(self, kind: WorkloadKind, name: str) -> WorkloadObject | None:
        """The object of that kind and name, or None."""
        ...

    def admission(self, obj: WorkloadObject) -> Admission | None:
        """The admission recorded in ``obj``'s status, read back (None: none recorded); an
        error naming ``obj`` when what is recorded does not read."""
        ...

    def find(self, name: str) -> WorkloadObject | None:
        """The GPUService called ``name``, else the BatchJob, else None."""
        ...

    def create(self, ask: WorkloadAsk) -> bool:
        """Create the object asked for (no status); False when one by that name exists."""
        ...

    def want_endpoint(self, kind: WorkloadKind, name: str, serving: bool) -> None:
        """Ask for a service's endpoint on or off (the model stays loaded either way);
        UnknownWorkload when there is no such object."""
        ...

    def set_recovery(
        self, kind: WorkloadKind, name: str, mode: RecoveryMode, after: timedelta
    ) -> None:
        """Change a service's recovery choice in its spec (``recovery``, and the delay in
        whole seconds); nothing else in it changes, and its status and server are not
        touched (the controller records the choice). UnknownWorkload when there is no such
        object; ValueError for a batch job (recovery applies to served workloads)."""
        ...

    def delete(self, kind: WorkloadKind, name: str) -> None:
        """Ask for the object to go: a guarded one stays, deleting, until unguarded. None
        by that name is fine."""
        ...

    def guard(self, obj: WorkloadObject) -> bool:
        """Make the object wait for its reservation's release before it can go; False when
        it changed or went since ``obj`` was read (read it again)."""
        ...

    def unguard(self, obj: WorkloadObject) -> bool:
        """Let the object go (a deleting one then goes); False when it changed since read."""
        ...

    def set_status(
        self,
        kind: WorkloadKind,
        name: str,
        fields: Mapping[str, Any],
        conditions: Sequence[Condition],
        at: datetime,
    ) -> None:
        """Merge ``fields`` into the status (None removes one) and state ``conditions`` (a
        condition's transition time moves only when it flips). ValueError for the store's
        own fields (record, admission, reservation); UnknownWorkload when no such object."""
        ...

    def record_refusal(self, kind: WorkloadKind, name: str, refusal: Refusal, at: datetime) -> None:
        """Say on the object why admission refused it: status, condition and a warning
        event. UnknownWorkload when there is no such object; nothing is created."""
        ...


class WorkloadWatch(Protocol):
    """Changes to workload objects and their servers, as they happen."""

    def start(self, notify: Callable[[WorkloadKind, str], None], stop: threading.Event) -> None:
        """Call ``notify(kind, name)`` from background threads for every object seen (listed,
        added, changed, deleted, or its server changed) until ``stop`` is set. It survives
        the cluster's failures; a periodic full pass covers what it misses."""
        ...
