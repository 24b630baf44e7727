"""A machine's agent for tests: the real ``Agent`` on fake ports.

``agent`` runs machine "garage" with the cards it is given (NVML over ``FakeNvml``, or
simulated), publishing to a ``FakeCluster``'s reports, an empty model store on a
temporary folder, no catalog and no model held.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from nodeau.adapters.nvml_inventory import NvmlGpuInventory
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.apps.agent.agent import Agent, Link
from nodeau.apps.agent.memory import PodMemoryWatch
from nodeau.domain.catalog import Catalog
from tests.support.clock import ticking
from tests.support.fakes.fake_cluster import FakeCluster
from tests.support.fakes.fake_registry import FakeRegistry
from tests.support.fakes.fakes import FakeDisk, FakeModelStore

MACHINE = "garage"

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def agent(nvml_or_sim: NvmlGpuInventory | SimulatedGpuInventory, cluster: FakeCluster,
          tmp_path: Path, memory: PodMemoryWatch | None) -> Agent:  # fmt: skip
    class NoCatalog:
        def load(self) -> Catalog:
            return Catalog(entries=())

    class NoInspector:
        def inspect(self, path: Path) -> object:
            raise AssertionError("no model is held")

    return Agent(
        machine=MACHINE,
        connect=lambda: Link(server="fake", reports=cluster.reports),
        inventory=nvml_or_sim,
        store=FakeModelStore(
            MACHINE, disk=FakeDisk(tmp_path / "disk"), clock=ticking(T0 + timedelta(seconds=1))
        ),
        registry=FakeRegistry(),
        catalog=NoCatalog(),
        inspector=NoInspector(),  # type: ignore[arg-type]
        clock=ticking(T0 + timedelta(seconds=1)),
        memory=memory,
    )
