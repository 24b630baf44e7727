"""The one-machine plane over contract-checked fakes, for fast use-case tests.

``plane_with`` gives a ``MachinePlane`` on a temporary home with a tiny model imported
as "tiny": the state (FakeStateStore), the model server (FakeModelRuntime) and the
endpoints (``FakeEndpoints``) are fakes, the model files and simulated cards are real.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path

from nodeau.adapters.batch_files import HomeJobs
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.processes import this_starter
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.adapters.sqlite_marks import SqliteMarks
from nodeau.apps.models.actions import import_model
from nodeau.apps.models.bootstrap import build as build_models
from nodeau.apps.models.services import ModelServices
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.serving.commands import RunAsk
from nodeau.apps.settings import settings_from
from nodeau.domain.model_server import ServerAbilities
from nodeau.domain.records import Starter
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.errors import NodeauError
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_registry import FakeRegistry
from tests.support.fakes.fake_runtime import FakeModelRuntime
from tests.support.fakes.fake_state import FakeStateStore
from tests.support.real.home_adapters import HomeAdapters

NOW = datetime(2026, 11, 30, 9, 30, 5, tzinfo=UTC)


def clock() -> datetime:
    return NOW


class FakeEndpoints:
    """The loopback endpoints as the plane drives them: which run, on which port."""

    def __init__(self, fail: bool = False) -> None:
        self.running: dict[str, int] = {}
        self.origins: dict[str, tuple[str, ...]] = {}
        self._next = 18000
        self._fail = fail

    def free_port(self) -> int:
        self._next += 1
        return self._next

    def start(self, name: str, port: int, allowed_origins: tuple[str, ...] = ()) -> str:
        if self._fail:
            raise FailedService(f"{name}: the endpoint's user service did not start")
        self.running[name] = port
        self.origins[name] = allowed_origins
        return "fake user service"

    def stop(self, name: str) -> None:
        self.running.pop(name, None)

    def listens(self, port: int) -> bool:
        return port in self.running.values()

    def allowed_origins(self, name: str) -> tuple[str, ...] | None:
        return self.origins.get(name)


class FailedService(NodeauError):
    pass


class Parts(HomeAdapters):
    def __init__(self, home: Path, cards: str, endpoints: FakeEndpoints) -> None:
        self.settings = settings_from(
            {"NODEAU_HOME": str(home), "NODEAU_MACHINE": "m1", "NODEAU_SIMULATED_GPUS": cards}
        )
        self.state = FakeStateStore(clock)
        self.runtime = FakeModelRuntime(clock)
        self.endpoints = endpoints
        self.inventory = SimulatedGpuInventory("m1", cards)

    @property
    def server(self) -> ServerAbilities:
        return self.runtime.abilities

    @property
    def processes(self) -> FakeModelRuntime:
        return self.runtime  # what stops its servers

    def endpoint_listens(self, port: int) -> bool:
        return self.endpoints.listens(port)

    @cached_property
    def models(self) -> ModelServices:
        s = self.settings
        return build_models(
            s,
            store=FilesystemModelStore(s.models_root, "m1", reserve_bytes=0, clock=clock),
            inspector=GgufModelInspector(),
            registry=FakeRegistry(),
        )

    @cached_property
    def marks(self) -> SqliteMarks:
        return SqliteMarks(self.settings.state_path)

    @cached_property
    def jobs(self) -> HomeJobs:
        return HomeJobs(self.settings.home)

    @cached_property
    def starter(self) -> Starter:
        return this_starter()


def plane_with(
    tmp_path: Path, cards: str = "1 x 24 GiB", fail_endpoint: bool = False
) -> tuple[MachinePlane, Parts]:
    parts = Parts(tmp_path / "home", cards, FakeEndpoints(fail=fail_endpoint))
    parts.settings.home.mkdir(parents=True)
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=7)
    m = parts.models
    import_model(
        model,
        alias="tiny",
        register=True,
        inspector=m.inspector,
        store=m.store,
        registry=m.registry,
    )
    # the plane looks for its state database before reading it
    parts.settings.state_path.touch()
    return MachinePlane(parts.settings, parts, clock), parts  # type: ignore[arg-type]


def ask(name: str | None = None, context: int | None = 512, *, unproved: bool = True) -> RunAsk:
    """A run of the imported tiny model (random weights: it proves nothing, so serving it
    takes ``--unproved``)."""
    return RunAsk(
        model="tiny",
        name=name,
        task=Task.CHAT,
        context_tokens=context,
        recovery=RecoveryMode.NEVER,
        recovery_after=timedelta(minutes=3),
        unproved=unproved,
    )
