"""Qualifying on this machine (``apps.qualify``): started like ``run``, stopped whatever happens.

Evidence kept per artifact; only a card's own reading becomes a measurement. Server and probes
are fakes; registry, store and inspector are real (end to end: tests/e2e/test_qualify_cli.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from attrs import evolve

from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.processes import this_starter
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.adapters.sqlite_registry import SqliteRegistry
from nodeau.apps.models.actions import Resolved, import_model, resolve_model
from nodeau.apps.models.bootstrap import build as build_models
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.qualification.machine import QualifyParts, qualify
from nodeau.apps.serving.commands import RunAsk, Started
from nodeau.apps.serving.model_servers import Rules
from nodeau.apps.settings import settings_from
from nodeau.domain.hardware import MachineReading
from nodeau.domain.marking import Marks
from nodeau.domain.memory import Source
from nodeau.domain.organisation import Organisation, Requester
from nodeau.domain.plans import HOME
from nodeau.domain.probes import probes_for
from nodeau.domain.qualification import (
    MemorySource,
    ProbeOutcome,
    ProbeResult,
    QualificationEvidence,
)
from nodeau.domain.refusals import ReasonCode, Refusal
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import RecoveryMode
from nodeau.ports.runtime import MemoryUse, RunningServer, RuntimeFailure, ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_runtime import FakeModelRuntime
from tests.support.fakes.fake_state import FakeStateStore
from tests.support.real.home_adapters import HomeAdapters

NOW = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)
PEAK = 300 * 1024 * 1024


def clock() -> datetime:
    return NOW


class CardInventory(SimulatedGpuInventory):
    """The simulated cards, read as if they were real ones (NVML would name them)."""

    def read(self) -> MachineReading:
        reading = super().read()
        cards = tuple(evolve(r, gpu=evolve(r.gpu, simulated=False)) for r in reading.gpus)
        return evolve(reading, gpus=cards, simulated=False)


class CardRuntime(FakeModelRuntime):
    """A fake server whose memory is read the way NVML reads a card's; it can refuse a task."""

    def __init__(self, refuse: Task | None = None) -> None:
        super().__init__(clock)
        self.refuse = refuse
        self.stopped: list[int] = []

    def start(
        self,
        spec: ServerSpec,
        ready_timeout_s: float,
        *,
        launched: Callable[[RunningServer], None] | None = None,
    ) -> RunningServer:
        if spec.config.task is self.refuse:
            raise RuntimeFailure(f"{spec.name}: the model cannot serve {spec.config.task.value}")
        return super().start(spec, ready_timeout_s, launched=launched)

    def stop(self, server: RunningServer, grace_s: float) -> None:
        self.stopped.append(server.pid)
        super().stop(server, grace_s)

    def memory(self, server: RunningServer) -> MemoryUse | None:
        return MemoryUse(bytes=PEAK, source="nvml") if self.alive(server) else None


def passing_chat(
    base_url: str,
    task: Task,
    model: str,
    rng: random.Random,
    *,
    headers: Mapping[str, str] | None = None,
) -> tuple[ProbeResult, ...]:
    """Chat passes, everything else fails (what a probe client answers for such a model)."""
    assert base_url.startswith("http://127.0.0.1:")
    assert model.startswith("qualify-")
    return tuple(
        ProbeResult(
            capability=c,
            outcome=ProbeOutcome.PASSED if c.value == "chat" else ProbeOutcome.FAILED,
            asked=f"{c.value}: word {rng.randrange(1000)}",
            answered="an answer",
            why="stand-in",
        )
        for c in probes_for(task)
    )


class World:
    def __init__(self, home: Path, *, card: bool, refuse: Task | None = None) -> None:
        self.settings = settings_from(
            {
                "NODEAU_HOME": str(home),
                "NODEAU_MACHINE": "m1",
                "NODEAU_SIMULATED_GPUS": "1 x 24 GiB",
            }
        )
        self.settings.home.mkdir(parents=True)
        s = self.settings
        self.models = build_models(
            s,
            store=FilesystemModelStore(s.models_root, "m1", reserve_bytes=0, clock=clock),
            inspector=GgufModelInspector(),
            registry=SqliteRegistry(s.home / "registry.sqlite3"),
        )
        self.inventory = (CardInventory if card else SimulatedGpuInventory)("m1", "1 x 24 GiB")
        self.state = FakeStateStore(clock)
        self.runtime = CardRuntime(refuse)

    def parts(self, reported: int | None = 200 * 1024 * 1024) -> QualifyParts:
        return QualifyParts(
            models=self.models,
            inventory=self.inventory,
            state=self.state,
            runtime=self.runtime,
            server=self.runtime.abilities,
            marks=Marks(),
            log_dir=self.settings.log_dir,
            clock=clock,
            probe=passing_chat,
            reported_bytes=lambda _log: reported,
            runtime_name=lambda _server: "fake-server 1.0",
            rules=Rules(
                plan=HOME, organisation=Organisation.none(), requester=Requester(user="tester")
            ),
            starter=this_starter(),
        )

    def imported(self, path: Path, alias: str = "mine") -> Resolved:
        m = self.models
        import_model(
            path,
            alias=alias,
            register=True,
            inspector=m.inspector,
            store=m.store,
            registry=m.registry,
        )
        return resolve_model(alias, m.registry.book(), m.catalog())


@pytest.fixture
def model(tmp_path: Path) -> Iterator[Path]:
    yield write_tiny_llama(tmp_path / "tiny.gguf", seed=11)


def test_on_a_card_the_nvml_peak_becomes_a_measurement_admission_then_uses(
    tmp_path: Path, model: Path
) -> None:
    world = World(tmp_path / "home", card=True)
    resolved = world.imported(model)
    evidence = qualify(resolved, 512, world.parts(), seed=7)
    assert isinstance(evidence, QualificationEvidence)
    assert evidence.gpu_model == "Simulated GPU (24 GiB)"  # read as a card: no CPU note
    assert [(m.task, m.peak_bytes, m.source) for m in evidence.memory] == [
        (Task.CHAT, PEAK, MemorySource.NVML),
        (Task.EMBED, PEAK, MemorySource.NVML),
        (Task.RERANK, PEAK, MemorySource.NVML),
    ]
    assert world.models.registry.evidence().history(resolved.artifact.id) == (evidence,)
    measured = world.models.registry.measurements().configurations_of(resolved.artifact.id.hex)
    assert {k.config_key.split(",")[0] for k in measured} == {
        "task=chat",
        "task=embed",
        "task=rerank",
    }
    # every server it started was stopped, and nothing holds the card
    assert len(world.runtime.stopped) >= 3
    assert not any(world.runtime.alive(s) for s in _started(world))
    assert all(r.workload.state.value == "stopped" for r in world.state.snapshot().workloads)

    # admission now uses the measurement for the same configuration, labelled measured
    plane = MachinePlane(world.settings, _PlaneParts(world), clock)
    started = plane.serving.run(
        RunAsk(
            model="mine",
            name="chat",
            task=Task.CHAT,
            context_tokens=512,
            recovery=RecoveryMode.NEVER,
            recovery_after=timedelta(minutes=3),
        )
    )
    assert isinstance(started, Started)
    assert started.source == Source.MEASURED.value
    assert started.reserved_bytes == PEAK


def test_on_simulated_hardware_the_runtimes_buffers_are_evidence_never_a_measurement(
    tmp_path: Path, model: Path
) -> None:
    world = World(tmp_path / "home", card=False)
    resolved = world.imported(model)
    evidence = qualify(resolved, 512, world.parts(), seed=7)
    assert isinstance(evidence, QualificationEvidence)
    assert {m.source for m in evidence.memory} == {MemorySource.RUNTIME_BUFFERS}
    assert "simulated" in evidence.gpu_model
    assert world.models.registry.measurements().measurements == ()


def test_a_server_that_cannot_start_fails_its_probes_and_the_others_still_run(
    tmp_path: Path, model: Path
) -> None:
    world = World(tmp_path / "home", card=False, refuse=Task.EMBED)
    evidence = qualify(world.imported(model), 512, world.parts(), seed=3)
    assert isinstance(evidence, QualificationEvidence)
    embed = evidence.result(probes_for(Task.EMBED)[0])
    assert embed is not None
    assert embed.outcome is ProbeOutcome.FAILED
    assert embed.why == "the model server did not start for embed"
    assert "the model cannot serve embed" in embed.answered
    chat = evidence.result(probes_for(Task.CHAT)[0])
    assert chat is not None and chat.passed
    assert [m.task for m in evidence.memory] == [Task.CHAT, Task.RERANK]


def test_the_same_seed_asks_the_same_and_is_kept(tmp_path: Path, model: Path) -> None:
    world = World(tmp_path / "home", card=False)
    resolved = world.imported(model)
    first = qualify(resolved, 512, world.parts(), seed=42)
    second = qualify(resolved, 512, world.parts(), seed=42)
    other = qualify(resolved, 512, world.parts(), seed=43)
    assert isinstance(first, QualificationEvidence) and isinstance(second, QualificationEvidence)
    assert isinstance(other, QualificationEvidence)
    assert first.seed == 42
    assert [p.asked for p in first.probes] == [p.asked for p in second.probes]
    assert [p.asked for p in first.probes] != [p.asked for p in other.probes]


def test_a_refusal_stops_it_before_anything_starts_and_records_nothing(
    tmp_path: Path, model: Path
) -> None:
    world = World(tmp_path / "home", card=False)
    world.inventory = SimulatedGpuInventory("m1", "1 x 1 GiB")
    resolved = world.imported(model)
    refused = qualify(resolved, 131072, world.parts(), seed=1)
    assert isinstance(refused, Refusal)
    assert refused.code is ReasonCode.NO_CARD_LARGE_ENOUGH
    assert world.runtime.started == []
    assert world.models.registry.evidence().for_artifact(resolved.artifact.id) is None


def _started(world: World) -> list[RunningServer]:
    return [r.server for r in world.state.snapshot().workloads if r.server is not None]


class _PlaneParts(HomeAdapters):
    """``MachineParts`` over the world's adapters (no endpoint is needed to be admitted)."""

    def __init__(self, world: World) -> None:
        self.settings = world.settings
        self.models = world.models
        self.inventory = world.inventory
        self.state = world.state
        self.runtime = world.runtime
        self.server = world.runtime.abilities
        from nodeau.adapters.sqlite_marks import SqliteMarks
        from tests.support.fakes.machine_plane import FakeEndpoints

        self.marks = SqliteMarks(world.settings.state_path)
        self.endpoints = FakeEndpoints(fail=False)
        self.starter = this_starter()

    def endpoint_listens(self, port: int) -> bool:
        return self.endpoints.listens(port)
