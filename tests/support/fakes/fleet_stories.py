"""A fleet in memory whose clock the test moves, for recovery told pass by pass.

``Story``: a ``FakeCluster``, its controller and a ``Clock``; ``tick`` moves the clock,
renews the signals of every machine that still answers and runs one pass. ``Fleet``: the
same with the Kubernetes plane the CLI uses on it.
"""

from __future__ import annotations

from datetime import timedelta

from attrs import evolve

from nodeau.apps.controller.loop import Controller
from nodeau.apps.planes.kubernetes import KubernetesPlane
from nodeau.apps.recovery.commands import RecoveryView
from nodeau.domain.asks import WorkloadAsk
from nodeau.domain.health import Health
from nodeau.domain.workloads import RecoveryMode, WorkloadKind, WorkloadState
from tests.support.clock import Clock
from tests.support.fakes.controller_fleet import (
    START,
    controller,
    fleet,
    fleet_plane,
    record,
    state,
)
from tests.support.fakes.fake_cluster import FakeCluster

S = WorkloadState
SERVICE, BATCH = WorkloadKind.SERVICE, WorkloadKind.BATCH
AUTO = RecoveryMode.AUTOMATIC
DELAY = timedelta(seconds=60)
STEP = 10  # seconds between passes, the controller's default resync


class Story:
    """A fleet, its controller and its clock."""

    def __init__(self, *machines: str, cards: int = 1, control_plane: str | None = None) -> None:
        self.clock = Clock(START)
        self.cluster: FakeCluster = fleet(*machines, cards=cards, clock=self.clock)
        if control_plane is not None:
            self.cluster.nodes[control_plane].control_plane = True
        self.quiet: set[str] = set()
        self.lines: list[str] = []
        self.ctl: Controller = controller(self.cluster, self.lines)
        self.renew()

    def renew(self) -> None:
        for m, node in self.cluster.nodes.items():
            if m in self.quiet:
                continue
            node.heartbeat_at = self.clock.now
            report = self.cluster.reports.reports.get(m)
            if report is not None:
                self.cluster.reports.publish(evolve(report, at=self.clock.now))

    def tick(self, seconds: int = STEP) -> None:
        """Time passes, the machines that answer renew their signals, one pass runs."""
        self.clock.now += timedelta(seconds=seconds)
        self.renew()
        self.ctl.resync()

    def run_for(self, seconds: int) -> None:
        for _ in range(seconds // STEP):
            self.tick()

    def serve(self, name: str = "chat", **ask: object) -> None:
        """``name`` admitted, started and serving."""
        fields: dict[str, object] = {"recovery": AUTO, "recovery_after": DELAY, **ask}
        self.cluster.objects.create(
            WorkloadAsk(kind=SERVICE, name=name, model="qwen", **fields)  # type: ignore[arg-type]
        )
        self.tick()
        self.cluster.pods.run()
        self.tick()
        assert state(self.cluster, name) is S.SERVING

    def off_the_network(self, *machines: str) -> None:
        self.quiet.update(machines)

    def back(self, *machines: str) -> None:
        self.quiet.difference_update(machines)

    def machine_of(self, name: str = "chat") -> str:
        return record(self.cluster, name).workload.machine

    def health(self, machine: str) -> Health:
        return self.cluster.health.read()[machine].state


def seconds_until_moved(story: Story, limit: int = 600, name: str = "chat") -> int:
    """Passes until ``name`` leaves its machine; the seconds it took."""
    before = story.machine_of(name)
    for waited in range(STEP, limit + STEP, STEP):
        story.tick()
        if story.machine_of(name) != before:
            return waited
    raise AssertionError(f"{name} did not move within {limit} s")


class Fleet:
    """A fleet, its controller, the plane the CLI uses on it, and a clock the test moves."""

    def __init__(self, *machines: str) -> None:
        self.clock = Clock(START)
        self.cluster: FakeCluster = fleet(*machines, clock=self.clock)
        self.ctl = controller(self.cluster)
        self.plane: KubernetesPlane = fleet_plane(self.cluster)
        self.quiet: set[str] = set()

    def tick(self, seconds: int = 10) -> None:
        """Time passes; the machines that answer renew both signals; one controller pass."""
        self.clock.now += timedelta(seconds=seconds)
        for name, node in self.cluster.nodes.items():
            if name not in self.quiet:
                node.heartbeat_at = self.clock.now
                report = self.cluster.reports.reports[name]
                self.cluster.reports.publish(evolve(report, at=self.clock.now))
        self.ctl.resync()

    def serve(self, name: str = "chat", **fields: object) -> None:
        self.cluster.objects.create(
            WorkloadAsk(kind=SERVICE, name=name, model="qwen", **fields)  # type: ignore[arg-type]
        )
        self.tick()
        self.cluster.pods.run()
        self.tick()
        assert record(self.cluster, name).workload.state is S.SERVING

    def row(self, name: str = "chat") -> RecoveryView:
        [found] = [v for v in self.plane.recovery.status().services if v.name == name]
        return found
