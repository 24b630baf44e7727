"""Copies end to end over the contract-checked fakes: ``nodeau models copy`` through the fleet's
plane, the agent's rounds and its copy worker, the real HTTP publisher adapter against the
local publisher and its faults (cuts, wrong bytes, stalls, a full disk). What is checked is
the state a person reads, what the store counts verified, and what the publisher was asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from nodeau.adapters.http_publisher import HttpPublisher, fetch_url
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.apps.agent.agent import Agent, Link
from nodeau.apps.agent.copies import CopyWorker
from nodeau.apps.copies.commands import CopyView
from nodeau.apps.planes.kubernetes import KubernetesPlane
from nodeau.domain.artifacts import Sha256
from nodeau.domain.catalog import Catalog
from nodeau.domain.copies import imported_sentence
from nodeau.domain.fleet_reports import MachineArtifact
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.cluster import ClusterError
from tests.support.builders.copy_models import KIB, MIB, Model, catalog_of, model, some_bytes
from tests.support.builders.summaries import tiny_summary
from tests.support.fakes.controller_fleet import fake_fleet_cluster
from tests.support.fakes.fake_cluster import FakeCluster, FakeModelCopies, machine_report
from tests.support.fakes.fake_registry import FakeRegistry
from tests.support.fakes.fakes import FakeDisk, FakeModelStore
from tests.support.real.publisher import LocalPublisher, local_publisher

MACHINE = "garage"
SUMMARY = tiny_summary(quantisation="F32", tensor_count=1, tensor_bytes=1)
QWEN = model("qwen", ("model.gguf", 2 * MIB), ("tokenizer.json", 300 * KIB), seed=1)
LLAMA = model("llama", ("model.gguf", 1 * MIB), seed=7)


def now() -> datetime:
    return datetime.now(UTC)


class Catalogs:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def load(self) -> Catalog:
        return self.catalog


class Described:
    """The inspector: these files are not GGUF, their summary is given."""

    def inspect(self, path: Path) -> ModelSummary:
        return SUMMARY


class World:
    """One fleet in memory (garage, attic), garage's agent with its copy worker, and the
    fleet's plane as the CLI uses it."""

    def __init__(
        self,
        tmp_path: Path,
        publisher: LocalPublisher,
        *models: Model,
        store: FakeModelStore | None = None,
        stall_s: float = 5.0,
    ) -> None:
        self.publisher = publisher
        self.cluster = FakeCluster(now)
        for name in (MACHINE, "attic"):
            self.cluster.add_node(name)
        self.store = store or FakeModelStore(MACHINE, disk=FakeDisk(tmp_path), clock=now)
        self.registry = FakeRegistry()
        self.http = httpx.Client()
        self.said: list[str] = []
        self.worker = CopyWorker(
            machine=MACHINE,
            store=self.store,
            registry=self.registry,
            publisher=HttpPublisher(self.http, chunk_bytes=64 * KIB, stall_timeout_s=stall_s),
            url_for=lambda e, f: fetch_url(e.entry, f, base_url=publisher.base_url),
            say=self.said.append,
            retry_pause_s=0.05,
        )
        self.agent = Agent(
            machine=MACHINE,
            connect=self.link,
            inventory=SimulatedGpuInventory(MACHINE, "1 x 24 GiB"),
            store=self.store,
            registry=self.registry,
            catalog=Catalogs(catalog_of(*models)),
            inspector=Described(),
            clock=now,
            copies=self.worker,
        )
        c = self.cluster
        self.plane = KubernetesPlane(
            fake_fleet_cluster(c, copies=c.copies),
            clock=now,
        )  # fmt: skip
        self.catalog = catalog_of(*models)
        self.seen: list[CopyView] = []

    def link(self) -> Link:
        return Link(server="fake", reports=self.cluster.reports, copies=self.cluster.copies)

    def copy(self, m: Model | str, to: str = MACHINE) -> str:
        return self.plane.copies.request(
            m if isinstance(m, str) else m.name, to, self.catalog
        ).sentence

    def view(self, m: Model) -> CopyView | None:
        listed = self.plane.copies.listing().copies
        return next((c for c in listed if (c.machine, c.model) == (MACHINE, m.name)), None)

    def settle(self, done: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        """Run the agent's rounds until ``done()``; every view of every copy is kept."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.agent.round()
            self.seen += [c for c in self.plane.copies.listing().copies if c.machine == MACHINE]
            if done():
                return
            time.sleep(0.01)
        raise AssertionError(f"not within {timeout_s} s: {what}")

    def state(self, m: Model) -> str | None:
        found = self.view(m)
        return None if found is None else found.state

    def settled(self, m: Model) -> Callable[[], bool]:
        return lambda: self.state(m) in ("ready", "failed")

    def verified(self, m: Model) -> bool:
        return all(self.store.verified_path(f.sha256) for f in m.entry.entry.files)

    def close(self) -> None:
        self.agent.close()
        self.http.close()


@pytest.fixture
def publisher() -> Iterator[LocalPublisher]:
    with local_publisher() as served:
        yield served


@pytest.fixture
def world(tmp_path: Path, publisher: LocalPublisher) -> Iterator[World]:
    made = World(tmp_path, publisher, QWEN, LLAMA)
    yield made
    made.close()


def ready_only_when_verified(world: World, m: Model) -> None:
    """Every time the copy was shown ready, every file was verified (it never goes back)."""
    shown = [v.state for v in world.seen if v.model == m.name]
    if "ready" in shown:
        assert world.verified(m)
        assert shown[shown.index("ready") :] == ["ready"] * len(shown[shown.index("ready") :])


def test_a_copy_is_fetched_verified_and_ready_only_then(world: World) -> None:
    QWEN.serve(world.publisher)
    said = world.copy(QWEN)
    assert said.startswith(f"a copy of qwen ({QWEN.artifact[:12]}) on garage is asked for: its")
    assert world.state(QWEN) == "requested"
    world.settle(world.settled(QWEN), "the copy settling")
    assert world.state(QWEN) == "ready" and world.verified(QWEN)
    ready_only_when_verified(world, QWEN)
    view = world.view(QWEN)
    assert view is not None and view.asked_by == ("person",)
    assert view.sentence == "verified on garage: every file's SHA-256 checked there"
    assert world.registry.book().artifact(QWEN.entry.entry.artifact().id) is not None
    verified = "qwen is verified on garage: every file's SHA-256 matches"
    world.settle(lambda: verified in world.said, "the agent saying so")
    asked = len(world.publisher.requests)
    world.settle(lambda: True, "one more round")
    assert len(world.publisher.requests) == asked  # a ready copy is not fetched again


def test_cut_connections_resume_from_the_bytes_kept(world: World) -> None:
    QWEN.serve(world.publisher, cut_after=300 * KIB)
    world.copy(QWEN)
    world.settle(world.settled(QWEN), "the copy settling")
    assert world.state(QWEN) == "ready" and world.verified(QWEN)
    ranges = world.publisher.ranges(QWEN.path("model.gguf"))
    assert len(ranges) > 2 and ranges[0] is None
    assert all(r is not None and r.startswith("bytes=") for r in ranges[1:])
    assert any(line.startswith("resuming qwen after: ") for line in world.said)
    ready_only_when_verified(world, QWEN)


def test_wrong_bytes_fail_with_their_reason_are_never_ready_and_are_not_retried(
    world: World,
) -> None:
    QWEN.serve(world.publisher, wrong_bytes=True)
    world.copy(QWEN)
    world.settle(world.settled(QWEN), "the copy settling")
    view = world.view(QWEN)
    assert view is not None and view.state == "failed"
    assert "model.gguf: wrong bytes (expected SHA-256" in view.sentence
    assert view.sentence.endswith(
        "not retried: take the request back (nodeau models copy qwen --to garage --remove) "
        "and ask again"
    )
    assert not world.verified(QWEN)
    assert "ready" not in {v.state for v in world.seen}
    asked = len(world.publisher.requests)
    for _ in range(5):
        world.agent.round()
    assert len(world.publisher.requests) == asked  # failed stays failed: no loop
    QWEN.serve(world.publisher)  # the publisher fixed; the person asks again
    assert "no file is deleted" in world.plane.copies.withdraw("qwen", MACHINE, world.catalog)
    world.copy(QWEN)
    world.settle(world.settled(QWEN), "the copy asked again settling")
    assert world.state(QWEN) == "ready" and world.verified(QWEN)


def test_a_stall_is_detected_and_fails_after_a_few_tries(
    tmp_path: Path, publisher: LocalPublisher
) -> None:
    world = World(tmp_path, publisher, QWEN, stall_s=0.2)
    try:
        QWEN.serve(publisher, stall_after=0, stall_s=5.0)
        world.copy(QWEN)
        world.settle(world.settled(QWEN), "the stalled copy settling")
        view = world.view(QWEN)
        assert view is not None and view.state == "failed"
        assert "no byte arrived for 0.2 s" in view.sentence
        assert len(publisher.ranges(QWEN.path("model.gguf"))) == 3
    finally:
        world.close()


def test_a_copy_that_would_eat_the_reserve_fails_before_the_first_byte(
    tmp_path: Path, publisher: LocalPublisher
) -> None:
    store = FakeModelStore(MACHINE, disk=FakeDisk(tmp_path), clock=now, free_bytes=MIB)
    world = World(tmp_path, publisher, QWEN, store=store)
    try:
        QWEN.serve(publisher)
        world.copy(QWEN)
        world.settle(world.settled(QWEN), "the copy settling")
        view = world.view(QWEN)
        assert view is not None and view.state == "failed"
        assert view.sentence.startswith(
            f"model.gguf: needs {2 * MIB} more bytes and only {MIB} are free above the reserve; "
            "nothing fetched"
        )
        assert publisher.requests == ()
    finally:
        world.close()


class ShrinkingDisk(FakeModelStore):
    """Room for the first check only: the disk fills up while the fetch runs."""

    checks = 0

    def free_bytes(self) -> int:
        self.checks += 1
        return 1 << 40 if self.checks == 1 else 100 * KIB


def test_a_copy_that_would_eat_the_reserve_while_fetching_stops_and_fails(
    tmp_path: Path, publisher: LocalPublisher
) -> None:
    store = ShrinkingDisk(MACHINE, disk=FakeDisk(tmp_path), clock=now)
    world = World(tmp_path, publisher, QWEN, store=store)
    try:
        QWEN.serve(publisher)
        world.copy(QWEN)
        world.settle(world.settled(QWEN), "the copy settling")
        view = world.view(QWEN)
        assert view is not None and view.state == "failed"
        assert "would eat into the free-disk reserve; fetch stopped" in view.sentence
        assert not world.verified(QWEN)
    finally:
        world.close()


def test_one_fetch_at_a_time_the_other_waits_and_says_behind_what(world: World) -> None:
    QWEN.serve(world.publisher, stall_after=256 * KIB, stall_s=1.5)
    LLAMA.serve(world.publisher)
    world.copy(QWEN)
    world.copy(LLAMA)
    world.settle(lambda: world.state(QWEN) == "fetching", "qwen fetching")
    world.settle(lambda: world.state(QWEN) == world.state(LLAMA) == "ready", "both copies ready")
    waited = {v.sentence for v in world.seen if v.model == "llama" and v.state == "waiting"}
    assert "waiting behind qwen: one fetch at a time on this machine" in waited
    order = [r.path for r in world.publisher.requests]
    last_qwen = max(i for i, p in enumerate(order) if p.startswith("/tests/qwen/"))
    first_llama = min(i for i, p in enumerate(order) if p.startswith("/tests/llama/"))
    assert last_qwen < first_llama, order  # qwen's last request came before llama's first
    ready_only_when_verified(world, QWEN)
    ready_only_when_verified(world, LLAMA)


def test_taking_the_request_back_stops_the_fetch_and_deletes_nothing(
    world: World, tmp_path: Path
) -> None:
    # stalled past the client's stall timeout: the withdrawal is seen on the resumed fetch's
    # first bytes, however long this test takes to withdraw
    QWEN.serve(world.publisher, stall_after=256 * KIB, stall_s=30.0)
    world.copy(QWEN)
    world.settle(lambda: world.state(QWEN) == "fetching", "qwen fetching")
    said = world.plane.copies.withdraw("qwen", MACHINE, world.catalog)
    assert said.startswith("the copy of qwen on garage is no longer asked for")
    world.settle(lambda: any(s.startswith("stopped fetching qwen") for s in world.said), "stop")
    assert world.view(QWEN) is None
    partial = tmp_path / "partial" / f"{QWEN.file('model.gguf').sha256.hex}.part"
    assert partial.stat().st_size > 0  # what arrived is kept for a resume


def test_a_recoverys_ask_keeps_the_request_when_the_person_takes_theirs_back(world: World) -> None:
    world.copy(QWEN)
    world.cluster.copies.request(MACHINE, QWEN.artifact, "qwen", "recovery:chat", now())
    said = world.plane.copies.withdraw(QWEN.artifact[:8], MACHINE, world.catalog)
    assert said == (
        "your ask for a copy of qwen on garage is taken back, but the copy stays: the recovery "
        "of chat relies on it; no file is deleted"
    )
    view = world.view(QWEN)
    assert view is not None and view.asked_by == ("recovery:chat",)


def test_an_imported_model_is_never_fetched_and_counts_once_imported_there(
    world: World, tmp_path: Path
) -> None:
    data = some_bytes(200 * KIB, 42)
    sha = Sha256.of_bytes(data).hex
    mine = MachineArtifact(
        id=sha, names=("mine",), size_bytes=len(data), path="/x", summary=SUMMARY
    )
    world.cluster.reports.publish(machine_report("attic", 1, mine, at=now()))
    said = world.copy("mine")
    assert said.endswith(imported_sentence(MACHINE))
    world.settle(lambda: world.worker.progress() != (), "the agent taking the request up")
    view = next(c for c in world.plane.copies.listing().copies if c.machine == MACHINE)
    assert (view.state, view.sentence) == ("requested", imported_sentence(MACHINE))
    assert world.publisher.requests == ()
    source = tmp_path / "mine.gguf"
    source.write_bytes(data)
    world.store.import_file(source)  # nodeau models import mine.gguf --no-register, on garage
    world.settle(
        lambda: any(
            c.machine == MACHINE and c.state == "ready" for c in world.plane.copies.listing().copies
        ),
        "the imported copy counted",
    )
    assert world.publisher.requests == ()


def test_the_machine_must_be_in_the_fleet_and_the_model_known(world: World) -> None:
    from nodeau.apps.models.actions import UnknownModel
    from nodeau.ports.cluster import UnknownMachine

    with pytest.raises(UnknownMachine, match=r"^no machine called 'shed' in the cluster"):
        world.copy(QWEN, to="shed")
    with pytest.raises(UnknownModel, match="nothing-like-it: no alias, catalog model or artifact"):
        world.copy("nothing-like-it")
    assert world.cluster.copies.requests() == ()


class Unreadable(FakeModelCopies):
    def requests(self) -> tuple[()]:
        raise ClusterError("403 forbidden by RBAC")


def test_a_round_that_cannot_read_the_requests_still_publishes(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.cluster.copies = Unreadable()
    assert world.agent.round() and world.agent.round()
    lines = capsys.readouterr().err.splitlines()
    problem = "nodeau-agent: cannot read the copy requests: 403 forbidden by RBAC"
    assert lines.count(problem) == 1
    assert world.cluster.reports.read().reports[0].machine == MACHINE
