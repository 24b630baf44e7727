"""The views the dashboard reads, as the planes give them, built for tests.

``workload``, ``machine``, ``plan`` and ``fleet`` build each view with any field changed;
``FakePlane`` gives the views it is handed (or raises one given as an exception);
``TARGET`` is a served chat workload as the Playground sees it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from nodeau.apps.dashboard import playground
from nodeau.apps.machines.commands import FleetListing, GpuView, MachineView
from nodeau.apps.planes.workload_view import WorkloadView
from nodeau.apps.plans.commands import PlanView

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GIB = 1024**3


def workload(
    name: str, state: str = "serving", kind: str = "service", **changes: Any
) -> WorkloadView:
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "model": "tiny",
        "machine": "box-a",
        "gpu": "GPU-1",
        "simulated": False,
        "state": state,
        "since": NOW,
        "endpoint": "http://127.0.0.1:4000/v1",
        "sentence": f"{state} on box-a since 12:00:00: sentence of {name}",
        **changes,
    }
    return WorkloadView(**fields)


def machine(name: str, health: str = "reporting", **changes: Any) -> MachineView:
    fields: dict[str, Any] = {
        "machine": name,
        "health": health,
        "health_sentence": None
        if health == "reporting"
        else f"{name} is {health}: its agent is quiet",
        "drained": False,
        "upgrading": False,
        "control_plane": False,
        "policy": "pack",
        "policy_from": "the fleet policy",
        "simulated": False,
        "reported_at": NOW,
        "gpus": (
            GpuView(
                uuid="GPU-1",
                model="L4",
                total_bytes=24 * GIB,
                held_by="chat",
                reserved_bytes=3 * GIB,
            ),
            GpuView(uuid="GPU-2", model="L4", total_bytes=24 * GIB, held_by=None, reserved_bytes=0),
        ),
        **changes,
    }
    return MachineView(**fields)


def plan(**changes: Any) -> PlanView:
    fields: dict[str, Any] = {
        "plane": "one machine",
        "installation_id": "inst-1",
        "plan": "home",
        "accepted": False,
        "reason": "none-present",
        "sentence": "The free Home plan applies: no entitlement is installed.",
        "detail": None,
        "warning": None,
        "source": None,
        "key_id": None,
        "features": (),
        "max_machines": 2,
        "max_gpus": 8,
        "protections": ("loopback",),
        "not_before": None,
        "expires_at": None,
        "grace_until": None,
        "clock": NOW,
        "clock_anchor": None,
        "clock_moved_back": False,
        **changes,
    }
    return PlanView(**fields)


class FakePlane:
    """The views a board reads, as given; a view given as an exception is raised."""

    description = "a fake plane"

    def __init__(self, **views: Any) -> None:
        self.views = views
        self.plan_advanced: list[bool] = []  # ``advance`` of each plans.in_force() call

    def _give(self, name: str) -> Any:
        value = self.views[name]
        if isinstance(value, Exception):
            raise value
        return value

    @property
    def machines(self) -> FeatureViews:
        return FeatureViews(self, "machines")

    @property
    def serving(self) -> FakePlane:
        return self  # the one serving command a board reads: workloads

    def workloads(self) -> tuple[WorkloadView, ...]:
        return cast(tuple[WorkloadView, ...], self._give("workloads"))

    @property
    def batches(self) -> FeatureViews:
        return FeatureViews(self, "batches")

    @property
    def copies(self) -> FeatureViews:
        return FeatureViews(self, "copies")

    @property
    def recovery(self) -> FeatureViews:
        return FeatureViews(self, "recovery")

    @property
    def plans(self) -> FakePlane:
        return self  # the one plan command a board reads: in_force

    def in_force(self, *, advance: bool = True) -> PlanView:
        self.plan_advanced.append(advance)
        return cast(PlanView, self._give("plan"))


def fleet(*machines: MachineView) -> FleetListing:
    return FleetListing(plane="a fake plane", fleet_policy="pack", machines=machines)


TARGET = playground.Target(
    name="chat",
    task="chat",
    model="tiny",
    artifact="ab" * 32,
    machine="box-a",
    gpu="GPU-1",
    state="serving",
    endpoint="http://127.0.0.1:4000/v1",
)


class FeatureViews:
    """One feature of the fake plane as a board reads it: its listing (or status) is the
    view given under ``view``."""

    def __init__(self, plane: FakePlane, view: str) -> None:
        self._plane = plane
        self._view = view

    def listing(self) -> Any:
        return self._plane._give(self._view)

    def status(self, *_which: Any) -> Any:
        return self._plane._give(self._view)
