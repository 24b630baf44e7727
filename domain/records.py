"""What a plane records about a workload: its record, its admission, the state a decision reads.

These are values every plane keeps in the same form (SQLite on one machine,
object status in a cluster); the rules on what may be recorded are in
``nodeau.domain.recording``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from attrs import field, frozen

from nodeau.domain.admission import Admitted
from nodeau.domain.memory import RuntimeConfig
from nodeau.domain.organisation import Requester, Spending
from nodeau.domain.placement import Placement
from nodeau.domain.reservations import Ledger
from nodeau.domain.workloads import Workload, holds_gpu


@frozen(kw_only=True)
class RunningServer:
    """A started model server: enough to reach it, check it and stop it later, from any process."""

    pid: int
    port: int
    started_at: datetime
    command: tuple[str, ...]
    # the process's start time as the system gives it (seconds since the epoch), which a
    # reused pid cannot share; None in records written before it was kept
    created_at: float | None = None
    # the key it was started with: every request to it must carry it (None: a server
    # started before servers had keys); never printed
    api_key: str | None = field(default=None, repr=False)

    @property
    def auth_headers(self) -> dict[str, str]:
        """The headers a request to it needs (none for a server without a key)."""
        return {} if self.api_key is None else {"Authorization": f"Bearer {self.api_key}"}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@frozen(kw_only=True)
class Starter:
    """The process starting a workload's model server (``nodeau run``): while it runs, the
    start is under way; once it is gone and the workload still starts, the start was
    interrupted."""

    pid: int
    created_at: float | None  # its start time as the system gives it (a reused pid differs)


@frozen(kw_only=True)
class WorkloadRecord:
    """A workload as the plane keeps it: the domain value plus how it is served."""

    workload: Workload
    config: RuntimeConfig
    model_path: str
    endpoint_port: int | None = None  # fixed once chosen: the address survives restarts
    server: RunningServer | None = None
    # who asked for it, whose quotas it spends (None: recorded before requesters were)
    requester: Requester | None = None
    starter: Starter | None = None  # what is starting its model server, while it starts


@frozen(kw_only=True)
class Admission:
    """What one admission decided and recorded: the arithmetic and the placement."""

    record: WorkloadRecord
    admitted: Admitted
    placement: Placement
    decided_at: datetime


@frozen(kw_only=True)
class Snapshot:
    """The plane's state at one moment, as a decision reads it."""

    ledger: Ledger
    workloads: tuple[WorkloadRecord, ...]

    def named(self, name: str) -> WorkloadRecord | None:
        return next((w for w in self.workloads if w.workload.name == name), None)


@frozen(kw_only=True)
class Event:
    """Something that happened to a workload, for ``nodeau ps`` history and audits."""

    at: datetime
    workload: str
    text: str


def spending(records: Iterable[WorkloadRecord]) -> tuple[Spending, ...]:
    """What the workloads holding a card spend, each for whoever asked for it."""
    return tuple(Spending(requester=r.requester) for r in records if holds_gpu(r.workload.state))
