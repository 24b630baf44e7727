"""The fleet on Kubernetes as a ``Plane``: the CLI asks with objects, the controller decides.

Decisions recorded here:

* The CLI decides nothing itself: ``run`` creates a GPUService (``submit_batch``
  a BatchJob) and waits, for a bounded time, for the controller's decision in
  the object's status. Admission and placement are the controller's.
* A refusal is reported as on one machine (kind, code, sentence) and the object
  is deleted: a refusal creates nothing. No decision in time: ``Undecided``,
  and the object is left for the controller.
* ``workloads`` lists every GPUService and BatchJob, decided or not: in a
  cluster an object can exist before the controller decides on it (``pending``).
* ``stop NAME`` sets ``spec.endpoint: stopped``; ``--workload`` deletes the
  object, and the controller, through its finalizer, stops the model server and
  releases the card.
* A batch job's requests travel in the BatchJob's spec. Running them to
  completion on the fleet is not built yet: ``batch results`` says so rather
  than printing nothing, and a job is never run locally on a joined machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Connection
from nodeau.apps.cli import cluster_objects as objects
from nodeau.apps.cli import cluster_run
from nodeau.apps.cli.cluster_fleet import machines as fleet_machines
from nodeau.apps.cli.cluster_plane import banner
from nodeau.apps.cli.cluster_workloads import ps_rows
from nodeau.apps.planes.plane import (
    BatchAsk,
    BatchOutcome,
    BatchSubmitted,
    BatchView,
    FleetListing,
    GpuView,
    MachineView,
    Refused,
    RunAsk,
    RunOutcome,
    Started,
    Undecided,
    WorkloadView,
)
from nodeau.domain.placement import Policy
from nodeau.domain.records import Admission
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.runs import name_from_model, name_problem
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.errors import NodeauError, SettingsError
from nodeau.ports.state import StateError

POLL_S = 0.2


class FleetResultsUnavailable(NodeauError):
    """A fleet batch job's results are not kept where the CLI can read them yet."""


def object_name(asked: str | None, model: str) -> str:
    """``--name`` when valid, else a name made from the model's (the domain's rule)."""
    if asked is not None:
        if (problem := name_problem(asked)) is not None:
            raise SettingsError(f"--name {problem}")
        return asked
    made = name_from_model(model)
    if made is None:
        raise SettingsError(f"cannot make a workload name from {model!r}; give --name")
    return made


def row_view(row: dict[str, Any]) -> WorkloadView:
    """A ``ps`` row read from the cluster, as the view both planes print."""
    record = row["record"]
    gpu = row["gpu"] if row["gpu"] != "-" else None
    since = None if record is None else datetime.fromisoformat(record["workload"]["since"])
    return WorkloadView(
        name=row["name"],
        kind=row["kind"],
        model=row["model"],
        machine=row["machine"] if row["machine"] != "-" else None,
        gpu=gpu,
        simulated=gpu is not None and "SIM-GPU" in gpu,
        state=row["state"],
        since=since,
        endpoint=row["endpoint"] if row["endpoint"] != "-" else None,
        sentence=row["sentence"],
    )


def refusal_from(status: dict[str, Any]) -> Refusal | None:
    """The refusal the controller recorded in an object's status, if any."""
    raw = status.get("refusal")
    if not isinstance(raw, dict):
        return None
    return Refusal.of(ReasonCode(str(raw.get("code"))), str(raw.get("message")))


class KubernetesPlane:
    """``Plane`` on a fleet on Kubernetes, through the API server."""

    def __init__(self, connection: Connection, clock: Callable[[], datetime]) -> None:
        self._connection = connection
        self._api = connection.api
        self._clock = clock

    @property
    def description(self) -> str:
        return banner(self._connection.server, self._connection.context).removeprefix("nodeau: ")

    # -- services

    def run(self, ask: RunAsk) -> RunOutcome:
        name = object_name(ask.name, ask.model)
        body = cluster_run.gpuservice(
            name,
            model=ask.model,
            task=ask.task.value,
            context=ask.context_tokens,
            recovery=ask.recovery.value,
            after=ask.recovery_after,
        )
        cluster_run.ask(self._api, body)
        decided = self._decision(WorkloadKind.SERVICE, name, ask.wait_s)
        if not isinstance(decided, dict):
            return decided
        held = objects.status(decided)
        reserved = held.get("reservedBytes")
        return Started(
            workload=self._view(name),
            reserved_bytes=int(reserved) if isinstance(reserved, int) else None,
            source=str(held.get("source", "estimated")),
        )

    def _decision(
        self, kind: WorkloadKind, name: str, wait_s: float
    ) -> dict[str, Any] | Refused | Undecided:
        obj = self._wait(kind, name, wait_s)
        if obj is None:
            return Undecided(name=name, waited_s=wait_s)
        refusal = refusal_from(objects.status(obj))
        if refusal is not None:
            objects.delete(self._api, kind, name)
            return Refused(name=name, refusal=refusal)
        return obj

    def _wait(self, kind: WorkloadKind, name: str, wait_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + wait_s
        while True:
            obj = objects.read(self._api, kind, name)
            if obj is None:
                raise StateError(f"{name} was deleted before the controller decided")
            if cluster_run.decided(obj):
                return obj
            if time.monotonic() >= deadline:
                return None
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))

    def _view(self, name: str) -> WorkloadView:
        return next(v for v in self.workloads() if v.name == name)

    def workloads(self) -> tuple[WorkloadView, ...]:
        return tuple(row_view(row) for row in ps_rows(self._api, self._clock()))

    def stop(self, name: str, *, workload: bool) -> str:
        kind, obj = objects.find(self._api, name)
        gpu = objects.status(obj).get("gpuUUID")
        if workload:
            objects.delete(self._api, kind, name)
            frees = f"frees {gpu}" if gpu else "releases whatever it held"
            return (
                f"{name}: {objects.KIND_NAMES[kind]} deleted; the controller stops its model "
                f"server and {frees}"
            )
        if kind is WorkloadKind.BATCH:
            return (
                f"{name} is a batch job: it has no endpoint to stop "
                "(nodeau stop NAME --workload stops it and frees its card)"
            )
        objects.patch_spec(self._api, kind, name, {"endpoint": "stopped"})
        return (
            f"{name}: endpoint stopped; the model stays loaded (nodeau run starts it again "
            "at once; --workload frees the card)"
        )

    def admission(self, name: str) -> Admission:
        _, obj = objects.find(self._api, name)
        return objects.admission_of(obj)

    # -- machines and marks

    def machines(self) -> FleetListing:
        fleet_policy, entries = fleet_machines(self._api)
        return FleetListing(
            plane=self.description,
            fleet_policy=fleet_policy,
            machines=tuple(
                MachineView(
                    machine=e["machine"],
                    health=e["health"],
                    health_sentence=e["health_sentence"],
                    drained=e["drained"],
                    upgrading=e["upgrading"],
                    control_plane=e["control_plane"],
                    policy=e["policy"],
                    policy_from=e["policy_from"],
                    simulated=e["simulated"],
                    reported_at=e["reported_at"],
                    gpus=tuple(GpuView(**g) for g in e["gpus"]),
                )
                for e in entries
            ),
        )

    def drain(self, node: str) -> str:
        from nodeau.adapters.kube.marks import drain

        return drain(self._api, node, self._clock()).sentence

    def undrain(self, node: str) -> str:
        from nodeau.adapters.kube.marks import undrain

        return undrain(self._api, node).sentence

    def set_policy(self, policy: Policy, node: str | None) -> str:
        from nodeau.adapters.kube.marks import set_policy

        return set_policy(self._api, policy, node).sentence

    # -- batch jobs

    def submit_batch(self, ask: BatchAsk) -> BatchOutcome:
        if (problem := name_problem(ask.name)) is not None:
            raise SettingsError(f"--name {problem}")
        spec: dict[str, Any] = {
            "model": ask.model,
            "task": ask.task.value,
            "requests": [
                {"custom_id": q.custom_id, "method": "POST", "url": q.url, "body": dict(q.body)}
                for q in ask.requests
            ],
        }
        if ask.context_tokens is not None:
            spec["contextTokens"] = ask.context_tokens
        body = {
            "apiVersion": r.API_VERSION,
            "kind": r.BATCHJOB_KIND,
            "metadata": {"name": ask.name, "namespace": r.NAMESPACE},
            "spec": spec,
        }
        objects.custom(self._api).create_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.BATCHJOBS, body
        )
        decided = self._decision(WorkloadKind.BATCH, ask.name, 60.0)
        if not isinstance(decided, dict):
            return decided
        reserved = objects.status(decided).get("reservedBytes")
        return BatchSubmitted(
            job=self._batch_view(decided, bad_lines=len(ask.problems)),
            workload=self._view(ask.name),
            reserved_bytes=int(reserved) if isinstance(reserved, int) else 0,
        )

    def _batch_view(self, obj: dict[str, Any], bad_lines: int = 0) -> BatchView:
        view = row_view(
            next(
                row
                for row in ps_rows(self._api, self._clock())
                if row["name"] == obj["metadata"]["name"]
            )
        )
        total = len((obj.get("spec") or {}).get("requests") or [])
        return BatchView(
            name=view.name,
            model=view.model,
            state=view.state,
            sentence=view.sentence,
            total=total,
            done=0,
            failed=0,
            left=total,
            bad_lines=bad_lines,
            results=None,
        )

    def batches(self, name: str | None) -> tuple[BatchView, ...]:
        listed = [obj for kind, obj in objects.list_all(self._api) if kind is WorkloadKind.BATCH]
        if name is not None:
            listed = [o for o in listed if o["metadata"]["name"] == name]
            if not listed:
                raise StateError(f"no batch job called {name!r}; nodeau batch status lists them")
        return tuple(self._batch_view(o) for o in listed)

    def batch_results(self, name: str) -> Iterator[dict[str, object]]:
        self.batches(name)
        raise FleetResultsUnavailable(
            f"{name} is a BatchJob on the fleet: the controller admits it and holds its card, but "
            "its requests are not yet sent to its model server on the fleet, so it has no "
            f"results to show; nodeau batch stop {name} frees the card"
        )

    def stop_batch(self, name: str) -> str:
        self.batches(name)
        objects.delete(self._api, WorkloadKind.BATCH, name)
        return f"{name}: BatchJob deleted; the controller stops its model server and frees its card"
