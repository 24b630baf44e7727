"""Admission decisions taken with the real domain, and a process that races to take them.

``decider`` builds the ``decide`` a ``StateStore.admit`` runs (the real ``admit_and_place``);
``Racers`` runs racing "spawn" processes against one store, SQLite or a cluster.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from returns.pipeline import is_successful
from returns.result import Failure, Result, Success

from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.domain.admission import AdmissionRequest, admit
from nodeau.domain.hardware import Fleet, Gpu, Machine
from nodeau.domain.memory import GIB, Prediction, RuntimeConfig, Source, Term
from nodeau.domain.placement import SchedulingSettings
from nodeau.domain.plans import ENTERPRISE
from nodeau.domain.refusals import Refusal
from nodeau.domain.scheduling import FleetView, admit_and_place
from nodeau.domain.workloads import Workload, WorkloadKind, WorkloadState
from nodeau.ports.state import Admission, Snapshot, StateStore, WorkloadRecord

MACHINE = "m1"
CARD_BYTES = 24 * GIB
NEEDED_BYTES = 9 * GIB + 12345  # fits one card, and two workloads would not fit one
ARTIFACT = "ab" * 32
BOUND_S = 60.0  # no process waits longer than this for the others

PREDICTION = Prediction(
    terms=(
        Term(name="weights", bytes=NEEDED_BYTES - GIB, source=Source.ESTIMATED, basis="flat"),
        Term(name="kv cache", bytes=GIB, source=Source.ESTIMATED, basis="flat"),
    ),
    source=Source.ESTIMATED,
)


def fleet_of(cards: int) -> Fleet:
    """One machine with ``cards`` identical cards."""
    gpus = tuple(
        Gpu(uuid=f"GPU-{i:04d}-race", model="NVIDIA H200", total_bytes=CARD_BYTES)
        for i in range(cards)
    )
    return Fleet(machines=(Machine(name=MACHINE, gpus=gpus),))


def view_of(fleet: Fleet, snapshot: Snapshot) -> FleetView:
    return FleetView(
        fleet=fleet,
        ledger=snapshot.ledger,
        settings=SchedulingSettings(),
        excluded=(),
        verified_on=frozenset(m.name for m in fleet.machines),
        predict=lambda _gpu_model: PREDICTION,
        plan=ENTERPRISE,  # unbounded: the stores' contract is not about plans
    )


def decider(
    name: str,
    fleet: Fleet,
    now: datetime,
    *,
    recovery_after: timedelta = timedelta(minutes=3),
    pause_s: float = 0.0,
) -> Callable[[Snapshot], Result[Admission, Refusal]]:
    """The decision ``nodeau run`` takes for workload ``name``, over a snapshot.

    ``pause_s`` stretches the time between reading the snapshot and recording,
    so a store that let two decisions overlap would be caught.
    """
    request = AdmissionRequest(
        workload=name,
        model="qwen-race",
        artifact_id=ARTIFACT,
        config=RuntimeConfig(context_tokens=4096),
        names=("qwen-race",),  # the model's names as admitted, as run and the controller give
    )

    def decide(snapshot: Snapshot) -> Result[Admission, Refusal]:
        view = view_of(fleet, snapshot)
        placed = admit_and_place(request, view)
        if pause_s:
            time.sleep(pause_s)
        if not is_successful(placed):
            return Failure(placed.failure())
        placement = placed.unwrap()
        # admit_and_place keeps only the placement; the arithmetic is admission's
        admitted = admit(request, fleet, view.ledger, view.verified_on, view.predict).unwrap()
        workload = Workload(
            name=name,
            kind=WorkloadKind.SERVICE,
            model=request.model,
            artifact_id=ARTIFACT,
            machine=placement.machine,
            gpu_uuid=placement.gpu_uuid,
            state=WorkloadState.ADMITTED,
            since=now,
            recovery_after=recovery_after,
        )
        record = WorkloadRecord(
            workload=workload, config=request.config, model_path=f"/models/{ARTIFACT}.gguf"
        )
        return Success(
            Admission(record=record, admitted=admitted, placement=placement, decided_at=now)
        )

    return decide


def open_store(where: str, index: int) -> StateStore:
    """The store a racing process uses: ``sqlite:PATH`` or ``kube:KUBECONFIG``."""
    kind, _, location = where.partition(":")
    if kind == "sqlite":
        return SqliteStateStore(Path(location), clock=lambda: datetime.now(UTC))
    from nodeau.adapters.kube.client import connect
    from nodeau.adapters.kube.state_store import KubeStateStore

    api = connect(Path(location)).api
    return KubeStateStore(api, clock=lambda: datetime.now(UTC), identity=f"racer-{index}")


def race(
    where: str,
    index: int,
    rounds: int,
    cards: int,
    pause_s: float,
    start: Barrier,
    results: Queue[tuple[int, int, str, str]],
) -> None:
    """One racing process (a ``nodeau run`` or a controller): each round, wait for the
    start, then try to admit a workload of its own through the store at ``where``.

    Puts ``(round, index, name, outcome)`` on ``results``; the outcome is
    ``won``, a refusal's reason code, or ``error: ...``.
    """
    store = open_store(where, index)
    fleet = fleet_of(cards)
    for round_ in range(rounds):
        start.wait(timeout=BOUND_S)
        name = f"r{round_:03d}-p{index:02d}"
        try:
            outcome = store.admit(name, decider(name, fleet, datetime.now(UTC), pause_s=pause_s))
            said = "won" if is_successful(outcome) else outcome.failure().code.value
        except Exception as exc:
            said = f"error: {exc!r}"
        results.put((round_, index, name, said))


class Racers:
    """``processes`` racing processes (started with "spawn"), released round by round."""

    def __init__(self, where: str, processes: int, rounds: int, cards: int, pause_s: float):
        spawn = multiprocessing.get_context("spawn")
        self.processes = processes
        self.start = spawn.Barrier(processes + 1)
        self.results: Queue[tuple[int, int, str, str]] = spawn.Queue()
        self.racers = [
            spawn.Process(
                target=race, args=(where, i, rounds, cards, pause_s, self.start, self.results)
            )
            for i in range(processes)
        ]

    def __enter__(self) -> Racers:
        for racer in self.racers:
            racer.start()
        return self

    def round(self) -> list[tuple[int, int, str, str]]:
        """Release every racer once; what each said."""
        self.start.wait(timeout=BOUND_S)
        return [self.results.get(timeout=BOUND_S) for _ in range(self.processes)]

    def __exit__(self, *_exc: object) -> None:
        self.start.abort()
        for racer in self.racers:
            racer.join(timeout=BOUND_S)
            if racer.is_alive():
                racer.kill()
                racer.join()
        self.results.close()
        self.results.join_thread()

    def exit_codes(self) -> list[int | None]:
        return [racer.exitcode for racer in self.racers]
