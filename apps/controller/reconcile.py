"""The reconcile of one GPUService or BatchJob: decide once, then drive its server and its state.

Why it is so: docs/adr/decisions/apps-controller.md (reconcile.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from datetime import datetime

from attrs import evolve
from returns.result import Failure, Result, Success

from nodeau.apps.controller.reading import FleetReading
from nodeau.apps.controller.turns import Turn
from nodeau.domain.batches import BatchCounts, batch_counts, batch_end, result_from_line
from nodeau.domain.fleet_admission import Decide, decider
from nodeau.domain.health import Health, MachineHealth
from nodeau.domain.lifecycle import (
    ServerPhase,
    ServerRestarts,
    needs_server,
    next_state,
    restarted_in_place,
    same_end,
    with_state,
)
from nodeau.domain.model_server import uses_card
from nodeau.domain.records import Admission
from nodeau.domain.recovery import left_behind, with_recovery
from nodeau.domain.refusals import Refusal
from nodeau.domain.restarts import restart_notice
from nodeau.domain.workloads import (
    Workload,
    WorkloadKind,
    WorkloadState,
    exit_words,
    holds_gpu,
    next_clause,
    recovery_words,
    short_gpu,
)
from nodeau.ports.batches import FleetBatches
from nodeau.ports.cluster import EventLog, ServerPod, ServerPods
from nodeau.ports.state import Snapshot, StateStore, UnknownWorkload, WorkloadRecord
from nodeau.ports.workload_objects import Condition, WorkloadObject, WorkloadObjects

KIND_NAMES = {WorkloadKind.SERVICE: "GPUService", WorkloadKind.BATCH: "BatchJob"}


def in_turn(decide: Decide, turn: Turn | None) -> Decide:
    """``decide``, letting the next object of the batch decide once it has (``turn``)."""
    if turn is None:
        return decide

    def deciding(snapshot: Snapshot) -> Result[Admission, Refusal]:
        try:
            return decide(snapshot)
        finally:
            turn.done()

    return deciding


class Reconciler:
    """Reconciles objects through the state store, the objects, their servers and Events."""

    def __init__(
        self,
        *,
        store: StateStore,
        objects: WorkloadObjects,
        pods: ServerPods,
        events: EventLog,
        clock: Callable[[], datetime],
        log: Callable[[str], None],
        batches: FleetBatches | None = None,
    ) -> None:
        self._store = store
        self._objects = objects
        self._pods = pods
        self._events = events
        self._clock = clock
        self._log = log
        self._batches = batches

    def event(self, obj: WorkloadObject, reason: str, message: str) -> None:
        """Record an Event about the object, and log it."""
        self._events.record(obj, reason, message, self._clock())
        self._log(f"{obj.title}: {reason}: {message}")

    def reconcile(
        self, kind: WorkloadKind, name: str, reading: FleetReading, turn: Turn | None = None
    ) -> None:
        """Bring one object one step (or several) closer to what it asks for (``turn``: when
        it may decide, among the batch's objects reconciled at once; None: at once)."""
        if self.decide(kind, name, reading, turn):
            self.carry_out(kind, name, reading)

    def decide(
        self, kind: WorkloadKind, name: str, reading: FleetReading, turn: Turn | None = None
    ) -> bool:
        """The object's first steps: a deletion finished, admission decided if it was not
        yet. True when its workload holds a card and its server is next (``carry_out``)."""
        obj = self._objects.get(kind, name)
        if obj is None:
            self._orphan(kind, name)
            return False
        if obj.deleting:
            self._finish_deletion(obj)
            return False
        if obj.refused:
            return False
        return obj.decided or self._decide(obj, reading, turn)

    def carry_out(self, kind: WorkloadKind, name: str, reading: FleetReading) -> None:
        """What an admitted workload's record calls for: its recovery choice kept, its
        server made or followed, its state and endpoint shown; the object guarded first."""
        obj = self._objects.get(kind, name)
        record = None if obj is None else obj.record
        if obj is None or record is None or not holds_gpu(record.workload.state):
            return
        if not obj.guarded:
            if not self._objects.guard(obj):
                return  # it changed since it was read: its watch event brings it back
            obj = self._objects.get(kind, name)
            record = None if obj is None else obj.record
            if obj is None or obj.deleting or record is None:
                return
        record = self._recovery_choice(obj, record)
        w = record.workload

        def on_card() -> bool:  # read only to make a server: a decided workload reads no fleet
            return not w.on_cpu and uses_card(reading.machines().locate(w.gpu_uuid), w.gpu_uuid)

        self._drive(obj, record, reading.health().get(w.machine), on_card)

    def _recovery_choice(self, obj: WorkloadObject, record: WorkloadRecord) -> WorkloadRecord:
        """The spec's recovery choice into the record, when a person changed it; nothing
        else changes (no server is touched)."""
        ask, w = obj.ask, record.workload
        if ask is None or w.kind is not WorkloadKind.SERVICE:
            return record
        if (ask.recovery, ask.recovery_after) == (w.recovery_mode, w.recovery_after):
            return record

        def change(current: WorkloadRecord) -> WorkloadRecord:
            chosen = with_recovery(current.workload, ask.recovery, ask.recovery_after)
            return evolve(current, workload=chosen)

        after = self._store.update(w.name, change)
        self.event(
            obj,
            "RecoveryChosen",
            f"recovery {recovery_words(ask.recovery, ask.recovery_after)}; nothing restarts",
        )
        return after

    def _decide(self, obj: WorkloadObject, reading: FleetReading, turn: Turn | None) -> bool:
        if obj.ask is None:
            self._log(f"{obj.title}: its spec does not read; nothing is decided")
            return False
        if turn is not None:
            turn.wait()
        inputs = reading.fleet()
        service = obj.ask.kind is WorkloadKind.SERVICE and not obj.ask.unproved
        counts = inputs.organisation.configured  # quotas are counted only under a policy
        with reading.counting(counts):
            now = self._clock()
            decide = decider(
                obj.ask,
                reports=inputs.reports,
                marks=inputs.marks,
                health=inputs.health,
                now=now,
                plan=inputs.plan,
                organisation=inputs.organisation,
                table=inputs.table,
                proved=reading.proved() if service else None,
                spent=reading.spending() if counts else None,
                fleet=reading.machines(),
                cards=reading.free_cards,
                plans=reading.plans,
                cuda_image=inputs.cuda_image,
            )
            match self._store.admit(obj.name, in_turn(decide, turn)):
                case Failure(Refusal() as refusal):
                    self._objects.record_refusal(obj.kind, obj.name, refusal, now)
                    self._log(f"{obj.title}: refused: {refusal.code.value}: {refusal.sentence}")
                    return False
                case Success(Admission() as admission):
                    reading.spend(admission.record)
                case _:
                    raise AssertionError("admit answers a Result")
        self._log(f"{obj.title}: placed: {admission.placement.why}")  # its Event: the store's
        return True

    def _drive(
        self,
        obj: WorkloadObject,
        record: WorkloadRecord,
        health: MachineHealth | None,
        on_card: Callable[[], bool],
    ) -> None:
        w = record.workload
        machine = None if health is None else health.state
        if self._batch_ended(obj, record, machine):
            return
        pod = self._pods.read(w.kind, w.name)
        if pod is not None and pod.machine is not None and left_behind(pod.machine, w.machine):
            self._end_stale(obj, w, pod.machine)
            pod = self._pods.read(w.kind, w.name)
        if health is not None and health.state is Health.UNREACHABLE:
            self._fence(obj, health)
            return
        phase = ServerPhase.ABSENT if pod is None else pod.phase
        made = needs_server(w.state, phase, machine, in_place=True) and self._pods.create(
            record, obj, on_card=on_card()
        )
        if made:
            self.event(
                obj, "Started", f"model server created on {w.machine} ({short_gpu(w.gpu_uuid)})"
            )
        seen = ServerRestarts() if pod is None else pod.restarts
        after = self._restarts(obj, record, phase, seen, machine)
        state = self._move(obj, record, phase, machine) if after is None else after.state
        if state is WorkloadState.SERVING and pod is not None and phase is ServerPhase.READY:
            self._show_endpoint(obj, record, pod)
        elif state is WorkloadState.RESTARTING:
            self._hide_endpoint(obj, after or w)
        elif obj.endpoint:
            self._no_route(obj, state, w.machine)

    def _batch_ended(
        self, obj: WorkloadObject, record: WorkloadRecord, machine: Health | None
    ) -> bool:
        """A batch job's counts shown, and its end carried out when the domain says it ends
        (its Pod deleted, then its card released); True when it ended or is ending."""
        w = record.workload
        if w.kind is not WorkloadKind.BATCH or self._batches is None or obj.ask is None:
            return False
        kept = (result_from_line(line) for line in self._batches.lines(w.name))
        counts = batch_counts(obj.ask.requests, (r for r in kept if r is not None))
        self._show_counts(obj, counts)
        end = batch_end(counts, stop_asked=obj.spec.get("stop") is True)
        if end is None:
            return False
        if self._pods.read(w.kind, w.name) is not None:
            self._pods.delete(w.kind, w.name, force=machine is Health.UNREACHABLE)
            if self._pods.read(w.kind, w.name) is not None:
                return True  # the card is released once the server is gone (its watch)
        now = self._clock()
        self._store.release(w.name, lambda rec: with_state(rec, end, now))
        how = "every request has its result" if end is WorkloadState.SUCCEEDED else "stopped"
        self.event(
            obj,
            end.value.title(),
            f"{how} ({counts.done} done, {counts.failed} failed of {counts.total}); "
            f"{w.gpu_uuid} on {w.machine} is free again, the results are kept",
        )
        return True

    def _show_counts(self, obj: WorkloadObject, counts: BatchCounts) -> None:
        shown = {"total": counts.total, "completed": counts.done, "failed": counts.failed}
        if all(obj.status.get(k) == v for k, v in shown.items()):
            return
        self._objects.set_status(obj.kind, obj.name, shown, [], self._clock())

    def _no_route(self, obj: WorkloadObject, state: WorkloadState, machine: str) -> None:
        """An endpoint shown for a server that does not serve (a recovery moved the
        workload before its old machine was ever fenced): out of status at once."""
        message = f"{state.value} on {machine}: nothing is routed to it until it serves"
        shown = Condition(type="Ready", ok=False, reason=state.value.title(), message=message)
        self._objects.set_status(obj.kind, obj.name, {"endpoint": ""}, [shown], self._clock())

    def _restarts(
        self,
        obj: WorkloadObject,
        record: WorkloadRecord,
        phase: ServerPhase,
        seen: ServerRestarts,
        machine: Health | None,
    ) -> Workload | None:
        """Record what the Pod says of its server's ends and restarts, when that changes the
        workload (the domain's ``restarted_in_place``); the workload after, or None."""
        w = record.workload
        now = self._clock()
        if restarted_in_place(w, phase, seen, machine, now) is None:
            return None

        def change(rec: WorkloadRecord) -> WorkloadRecord:
            found = restarted_in_place(rec.workload, phase, seen, machine, now)
            return rec if found is None else evolve(rec, workload=found)

        after = self._store.update(w.name, change).workload
        ended = after.last_exit
        if after.state is WorkloadState.RESTARTING and ended is not None:
            if w.last_exit is None or not same_end(w.last_exit, ended):
                said = f"{exit_words(ended)}; {next_clause(after)}"
                self._events.record(obj, "Restarting", said, now, warning=True)
                self._log(f"{obj.title}: Restarting: {said}")
        elif after.state is WorkloadState.RUNNING and w.state is not WorkloadState.RUNNING:
            self.event(obj, "Running", f"running on {w.machine} ({short_gpu(w.gpu_uuid)})")
        return after

    def _move(
        self,
        obj: WorkloadObject,
        record: WorkloadRecord,
        phase: ServerPhase,
        machine: Health | None,
    ) -> WorkloadState:
        """Record the domain's next state, if any; the state the workload is in after."""
        w = record.workload
        found = next_state(w.state, w.kind, phase, machine)
        if found is None:
            return w.state
        step: WorkloadState = found
        now = self._clock()
        if not holds_gpu(step):
            self._store.release(w.name, lambda rec: with_state(rec, step, now))  # Released
            why = "its model server exited" if w.kind is WorkloadKind.SERVICE else "it ended"
            self._log(
                f"{obj.title}: {step.value} ({why}); {w.gpu_uuid} on {w.machine} is free again"
            )
            return step
        self._store.update(w.name, lambda rec: with_state(rec, step, now))
        if step is WorkloadState.RUNNING:
            self.event(obj, "Running", f"running on {w.machine} ({short_gpu(w.gpu_uuid)})")
        return step

    def _show_endpoint(self, obj: WorkloadObject, record: WorkloadRecord, pod: ServerPod) -> None:
        w = record.workload
        stopped = obj.ask is not None and obj.ask.endpoint_stopped
        endpoint = "" if stopped else pod.endpoint or ""
        reason = "EndpointStopped" if stopped else "Serving"
        ready = obj.condition("Ready")
        if obj.endpoint == endpoint and ready is not None and ready.reason == reason:
            return
        if stopped:
            message = f"the endpoint is off; the model stays loaded on {w.machine}"
        else:
            message = f"serving at {endpoint} on {w.machine} ({short_gpu(w.gpu_uuid)})"
        shown = Condition(type="Ready", ok=not stopped, reason=reason, message=message)
        self._objects.set_status(obj.kind, obj.name, {"endpoint": endpoint}, [shown], self._clock())
        self.event(obj, "Stopped" if stopped else "Serving", message)

    def _end_stale(self, obj: WorkloadObject, w: Workload, left_on: str) -> None:
        """The server left on the machine a recovery moved the workload from: taken out of
        the cluster at once (that machine may not answer); its own agent ends it."""
        if self._pods.delete(w.kind, w.name, force=True):
            self.event(
                obj,
                "StaleServerEnded",
                f"the model server left on {left_on} is deleted ({w.name} runs on {w.machine} "
                f"now); {left_on}'s own Kubernetes agent ends it when it answers again, and "
                "nothing is routed to it",
            )

    def _fence(self, obj: WorkloadObject, health: MachineHealth) -> None:
        """A workload whose machine is unreachable: its endpoint is out of status, so no
        request is routed to it, even if its server still runs."""
        message = f"{health.sentence}; no request is routed to it"
        ready = obj.condition("Ready")
        if obj.endpoint == "" and ready is not None and ready.message == message:
            return
        shown = Condition(type="Ready", ok=False, reason="MachineUnreachable", message=message)
        self._objects.set_status(obj.kind, obj.name, {"endpoint": ""}, [shown], self._clock())
        if obj.endpoint:
            self.event(obj, "Fenced", message)

    def _hide_endpoint(self, obj: WorkloadObject, w: Workload) -> None:
        """A restarting workload's endpoint is out of status until it answers again."""
        message = restart_notice(w)
        ready = obj.condition("Ready")
        if (
            obj.endpoint == ""
            and ready is not None
            and (ready.reason, ready.message)
            == (
                "Restarting",
                message,
            )
        ):
            return
        shown = Condition(type="Ready", ok=False, reason="Restarting", message=message)
        self._objects.set_status(obj.kind, obj.name, {"endpoint": ""}, [shown], self._clock())

    def _finish_deletion(self, obj: WorkloadObject) -> None:
        if not obj.guarded and (obj.record is None or not holds_gpu(obj.record.workload.state)):
            return  # nothing of it to release: another's finalizer keeps it
        if self._pods.read(obj.kind, obj.name) is not None:
            self._pods.delete(obj.kind, obj.name)
            if self._pods.read(obj.kind, obj.name) is not None:
                return  # the card is released once the server is gone (its watch brings us back)
        record = obj.record
        if record is not None and holds_gpu(record.workload.state):
            now = self._clock()
            with suppress(UnknownWorkload):  # the store's release records Event "Released"
                self._store.release(
                    obj.name, lambda rec: with_state(rec, WorkloadState.STOPPED, now)
                )
            self._log(f"{obj.title}: deleted; its card is free again")
            found = self._objects.get(obj.kind, obj.name)  # the release wrote its status
            if found is None:
                return
            obj = found
        self._objects.unguard(obj)

    def _orphan(self, kind: WorkloadKind, name: str) -> None:
        """A server whose object is gone (unguarded by hand) is deleted too."""
        if self._pods.read(kind, name) is not None:
            self._pods.delete(kind, name)
            self._log(f"{KIND_NAMES[kind]} {name} is gone; its model server is deleted")
