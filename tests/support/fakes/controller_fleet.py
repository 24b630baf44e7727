"""A fleet in memory for the controller's use-case tests: a ``FakeCluster`` and its controller.

``fleet`` gives machines with 24 GiB cards and verified "qwen" (4 GiB) and "giant" (fits no
card); ``controller`` drives it one ``resync`` at a time. Also readers and misbehaving fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import evolve

from nodeau.adapters.entitlement_document import compiled_in_verifier
from nodeau.adapters.kube.resources import CONTROL_PLANE_LABEL, SERVER_IMAGE
from nodeau.apps.controller.loop import Controller
from nodeau.apps.planes.kubernetes import FleetCluster, KubernetesPlane
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.lifecycle import ServerRestarts
from nodeau.domain.memory import GIB, MeasuredKey, MeasuredTable, Measurement
from nodeau.domain.model_info import runtime_config
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import HeldReason, ServerExit, WorkloadKind, WorkloadState
from nodeau.ports.state import WorkloadRecord
from nodeau.ports.workload_objects import WorkloadObject
from tests.support.builders.summaries import SUMMARY
from tests.support.clock import Clock, ticking
from tests.support.fakes.fake_cluster import (
    FakeCluster,
    FakeServerPods,
    FakeWorkloadObjects,
    machine_report,
    verified,
)

START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
S = WorkloadState
SMALL, HUGE = "ab" * 32, "cd" * 32
ENDPOINT = "http://10.0.0.7:8080/v1"


def fleet(
    *machines: str, cards: int = 1, clock: Callable[[], datetime] | None = None
) -> FakeCluster:
    """Machines that each report ``cards`` 24 GiB cards and a verified 4 GiB "qwen" and a
    40 GiB "giant" (which fits no card)."""
    cluster = FakeCluster(clock or ticking(START))
    for m in machines:
        cluster.add_node(m)
        small = verified(m, SUMMARY, sha=SMALL, name="qwen", gib=4)
        huge = verified(m, SUMMARY, sha=HUGE, name="giant", gib=40)
        cluster.reports.publish(machine_report(m, cards, small, huge, at=START))
    return cluster


def controller(cluster: FakeCluster, lines: list[str] | None = None) -> Controller:
    ports = cluster.controller_ports()
    said = lines if lines is not None else []
    return Controller(ports, clock=cluster.clock, log=said.append)


def record(cluster: FakeCluster, name: str) -> WorkloadRecord:
    found = cluster.store.snapshot().named(name)
    assert found is not None, name
    return found


def state(cluster: FakeCluster, name: str) -> WorkloadState:
    return record(cluster, name).workload.state


def held_cards(cluster: FakeCluster) -> list[tuple[str, str]]:
    return [(x.workload, x.gpu_uuid) for x in cluster.ledger.read().reservations]


def held(r: WorkloadRecord, since: datetime) -> WorkloadRecord:
    w = evolve(
        r.workload,
        state=S.HELD,
        since=since,
        held_reason=HeldReason.MACHINE_UNREACHABLE_RECOVERY_OFF,
    )
    return evolve(r, workload=w)


def tick(cluster: FakeCluster, clock: Clock[datetime], when: datetime) -> None:
    """Time passes to ``when``; the machines' heartbeats and agent reports keep coming."""
    clock.now = when
    for name, node in cluster.nodes.items():
        node.heartbeat_at = when
        cluster.reports.publish(evolve(cluster.reports.reports[name], at=when))


ENDED = datetime(2026, 3, 1, 11, 0, 5, tzinfo=UTC)
AGAIN = ENDED + timedelta(seconds=20)


def serving_chat() -> tuple[FakeCluster, Clock[datetime], Controller]:
    clock = Clock(START)
    cluster = fleet("m1", clock=clock)
    cluster.objects.create(WorkloadAsk(kind=SERVICE, name="chat", model="qwen"))
    ctl = controller(cluster)
    ctl.resync()
    cluster.pods.run()
    ctl.resync()
    assert state(cluster, "chat") is S.SERVING
    return cluster, clock, ctl


def status_of(cluster: FakeCluster, name: str = "chat") -> tuple[str, str, str]:
    obj = cluster.objects.get(SERVICE, name)
    assert obj is not None
    return obj.status["state"], obj.status["sentence"], obj.endpoint


def fake_fleet_cluster(cluster: FakeCluster, **more: Any) -> FleetCluster:
    """The cluster's ports as the CLI's plane reads them, over ``cluster``'s fakes; ``more``:
    the optional ports a test gives too (``copies``, ``organisation``, ``identity``...)."""
    return FleetCluster(
        server="https://fake",
        context="fake",
        objects=cluster.objects,
        marks=cluster.marks,
        reports=cluster.reports,
        health=cluster.health,
        ledger=cluster.ledger,
        tokens=cluster.tokens,
        pods=cluster.pods,
        control_plane_label=CONTROL_PLANE_LABEL,
        server_image=SERVER_IMAGE,
        **more,
    )


def fleet_plane(cluster: FakeCluster) -> KubernetesPlane:
    return KubernetesPlane(
        fake_fleet_cluster(cluster), clock=cluster.clock, verifier=compiled_in_verifier
    )


def crash_loop(cluster: FakeCluster, clock: Clock[datetime], ctl: Controller) -> ServerExit:
    """The kubelet restarted chat's server at AGAIN; that restart ended too (OOMKilled after
    8 s), and it waits out a 20 s back-off; one pass a second later. The restart's end."""
    crashed = ServerExit.killed(9, "OOMKilled", AGAIN)
    looping = ServerRestarts(
        count=1,
        last_exit=crashed,
        ran_for=timedelta(seconds=8),
        down=True,
        backing_off=True,
        backoff=timedelta(seconds=20),
    )
    cluster.pods.report(SERVICE, "chat", looping)
    tick(cluster, clock, AGAIN + timedelta(seconds=1))
    ctl.resync()
    return crashed


class UnreadableObjects(FakeWorkloadObjects):
    """The fake's objects, whose spec no longer reads for the names in ``unreadable``."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(cluster)
        self.unreadable: set[str] = set()

    def _view(self, key: tuple[WorkloadKind, str]) -> WorkloadObject:
        seen = super()._view(key)
        return evolve(seen, ask=None) if key[1] in self.unreadable else seen


class Measured:
    """The peaks measured on the fleet's cards: qwen measured at 6 GiB on an NVIDIA L4."""

    def measurements(self) -> MeasuredTable:
        config = runtime_config(SUMMARY, Task.CHAT, None)
        key = MeasuredKey(artifact_id=SMALL, gpu_model="NVIDIA L4", config_key=config.key())
        return MeasuredTable(measurements=(Measurement(key=key, peak_bytes=6 * GIB),))


class LingeringPods(FakeServerPods):
    """Servers that stay until their machine lets them go (``leave``), as a real Pod does
    while its container is stopped."""

    def __init__(self) -> None:
        super().__init__()
        self.leaving: set[tuple[WorkloadKind, str]] = set()

    def delete(self, kind: WorkloadKind, workload: str, *, force: bool = False) -> bool:
        if (kind, workload) not in self.pods:
            return False
        self.leaving.add((kind, workload))
        return True

    def leave(self) -> None:
        for key in self.leaving:
            self.pods.pop(key, None)
        self.leaving.clear()
