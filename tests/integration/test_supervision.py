"""Supervision of a real model server: its end reaped, ``ps`` at each step, restarts, batch jobs.

Real llama-server, SQLite state, model files and simulated cards; the endpoint is a fake. The
supervisor's clock is the test's, so no test waits for a back-off. A missing binary fails.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import pytest
from attrs import evolve

from nodeau.adapters import processes
from nodeau.adapters.batch_files import HomeJobs
from nodeau.adapters.detached import read_status
from nodeau.adapters.fs_store import FilesystemModelStore
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.llama_server import LlamaServerRuntime, LocalServerProcesses
from nodeau.adapters.model_server_process import exit_path, server_alive, server_exit
from nodeau.adapters.processes import this_starter
from nodeau.adapters.server_abilities import ask_binary
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.adapters.sqlite_marks import SqliteMarks
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.batch_worker import bootstrap as batch_worker
from nodeau.apps.batches.commands import BatchAsk, BatchSubmitted
from nodeau.apps.endpoint.app import Unavailable
from nodeau.apps.endpoint.serve import upstream_from_state
from nodeau.apps.models.actions import import_model
from nodeau.apps.models.bootstrap import build as build_models
from nodeau.apps.models.services import ModelServices
from nodeau.apps.planes.machine import MachinePlane
from nodeau.apps.serving.commands import RunAsk, Started
from nodeau.apps.serving.supervision import Supervisor
from nodeau.apps.settings import settings_from
from nodeau.domain.batches import BatchRequest, BatchResult
from nodeau.domain.model_server import ServerAbilities
from nodeau.domain.records import Starter
from nodeau.domain.restarts import RestartPolicy
from nodeau.domain.tasks import Task
from nodeau.domain.workloads import ExitKind, RecoveryMode, ServerExit, WorkloadState
from nodeau.ports.runtime import RunningServer
from nodeau.ports.state import WorkloadRecord
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.clock import Clock
from tests.support.fakes.fake_registry import FakeRegistry
from tests.support.real.home_adapters import HomeAdapters
from tests.support.real.live_processes import naming
from tests.support.real.llama import llama_server_binary

CARD = "SIM-GPU-092fee4d-8a0c-5c09-bf89-10b04b9d1b58"  # the simulated card of machine m1
BOUND_S = 60.0


def hms(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M:%S")


@pytest.fixture(scope="module")
def binary() -> Path:
    return llama_server_binary()


@pytest.fixture(autouse=True)
def no_core_files() -> Iterator[None]:
    """A server killed by SIGSEGV writes no core file: the limit passes on to what it starts."""
    before = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, before[1]))
    yield
    resource.setrlimit(resource.RLIMIT_CORE, before)


class Endpoints:
    """The endpoints as the plane drives them (the real one is in tests/e2e)."""

    def __init__(self) -> None:
        self.running: dict[str, int] = {}

    def free_port(self) -> int:
        return 18001

    def start(self, name: str, port: int, allowed_origins: tuple[str, ...] = ()) -> str:
        self.running[name] = port
        return "fake user service"

    def stop(self, name: str) -> None:
        self.running.pop(name, None)

    def listens(self, port: int) -> bool:
        return port in self.running.values()

    def allowed_origins(self, name: str) -> tuple[str, ...] | None:
        return () if name in self.running else None


class Parts(HomeAdapters):
    def __init__(self, home: Path, binary: Path, clock: Clock[datetime]) -> None:
        self.settings = settings_from(
            {
                "NODEAU_HOME": str(home),
                "NODEAU_MACHINE": "m1",
                "NODEAU_SIMULATED_GPUS": "1 x 24 GiB",
            }
        )
        self.clock = clock
        self.state = SqliteStateStore(self.settings.state_path, clock)
        self.runtime = LlamaServerRuntime(binary)
        self.endpoints = Endpoints()
        self.inventory = SimulatedGpuInventory("m1", "1 x 24 GiB")
        self.processes = LocalServerProcesses()  # what stops a recorded server
        self._binary = binary

    @cached_property
    def server(self) -> ServerAbilities:
        """What the real llama-server says it can use (simulated cards: it is shown none)."""
        return ask_binary(self._binary, {"CUDA_VISIBLE_DEVICES": ""})

    def endpoint_listens(self, port: int) -> bool:
        return self.endpoints.listens(port)

    @cached_property
    def models(self) -> ModelServices:
        s = self.settings
        return build_models(
            s,
            store=FilesystemModelStore(s.models_root, "m1", reserve_bytes=0, clock=self.clock),
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

    def record(self, name: str = "tiny") -> WorkloadRecord:
        found = self.state.snapshot().named(name)
        assert found is not None
        return found


@pytest.fixture
def clock() -> Clock[datetime]:
    """The supervisor's and ``ps``'s clock: moved by the test."""
    return Clock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def machine(
    tmp_path: Path, binary: Path, clock: Clock[datetime]
) -> Iterator[tuple[MachinePlane, Parts]]:
    parts = Parts(tmp_path / "home", binary, clock)
    parts.settings.home.mkdir(parents=True, exist_ok=True)
    m = parts.models
    import_model(
        write_tiny_llama(tmp_path / "tiny.gguf", seed=7, quant="q8_0"),
        alias="tiny", register=True, inspector=m.inspector, store=m.store, registry=m.registry,
    )  # fmt: skip
    yield MachinePlane(parts.settings, parts, clock), parts
    for record in parts.state.snapshot().workloads:  # nothing outlives the test
        if record.server is not None:
            parts.runtime.stop(record.server, grace_s=2.0)


def run_tiny(plane: MachinePlane) -> None:
    outcome = plane.serving.run(
        RunAsk(
            model="tiny",
            name="tiny",
            task=Task.CHAT,
            context_tokens=256,
            recovery=RecoveryMode.NEVER,
            recovery_after=timedelta(minutes=3),
            unproved=True,  # random weights prove nothing
        )
    )
    assert isinstance(outcome, Started)


def kill(server: RunningServer, sig: signal.Signals) -> datetime:
    """Send ``sig`` to the server's process group and wait until it is gone; when it was sent."""
    sent = datetime.now(UTC)
    os.killpg(server.pid, sig)
    deadline = time.monotonic() + BOUND_S
    while server_alive(server):
        assert time.monotonic() < deadline, f"pid {server.pid} outlived {sig.name}"
        time.sleep(0.02)
    return sent


def reaped(server: RunningServer, log: Path) -> dict[str, Any]:
    """What the server's reaper wrote, read here (waiting for it a little)."""
    path = exit_path(log)
    deadline = time.monotonic() + BOUND_S
    while read_status(path, server.pid) is None:
        assert time.monotonic() < deadline, f"no exit status for pid {server.pid} in {path}"
        time.sleep(0.02)
    said: dict[str, Any] = json.loads(path.read_text())
    return said


def sentence(plane: MachinePlane) -> tuple[str, str]:
    [view] = plane.serving.workloads()
    return view.state, view.sentence


def answers(server: RunningServer) -> bool:
    return httpx.get(f"{server.base_url}/health", timeout=BOUND_S).status_code == 200


def live_servers_of(model: Path) -> list[int]:
    """Pids of running processes whose command line names ``model``."""
    return naming(model)


# -- the reaper


def test_the_reaper_keeps_how_the_server_ended_and_stopping_its_group_leaves_nothing(
    machine: tuple[MachinePlane, Parts],
) -> None:
    plane, parts = machine
    run_tiny(plane)
    record = parts.record()
    server = record.server
    assert server is not None and answers(server)
    log = parts.settings.log_dir / "tiny.log"
    # only the server names the model file: its reaper's command line does not
    assert live_servers_of(Path(record.model_path)) == [server.pid]
    stop = plane.serving.stop("tiny", workload=True)
    assert stop == "tiny: endpoint and model stopped; " + CARD + " is free"
    said = reaped(server, log)
    # llama-server ends cleanly on SIGTERM
    assert (said["code"], said["signal"], said["signal_name"]) == (0, None, None)
    assert server_exit(server, log) == ServerExit.exited(0, datetime.fromtimestamp(said["at"], UTC))
    assert live_servers_of(Path(record.model_path)) == []
    assert _pids_naming(str(exit_path(log))) == []  # its reaper wrote the status and exited


def _pids_naming(text: str) -> list[int]:
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _names(entry, text)
    ]


def _names(entry: Path, text: str) -> bool:
    try:
        return os.fsencode(text) in (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


# -- a service: killed, killed again, a start that fails, an end nobody kept


def test_a_killed_server_is_restarted_with_the_kubelet_backoff_and_ps_says_each_step(
    machine: tuple[MachinePlane, Parts], clock: Clock[datetime], tmp_path: Path
) -> None:
    plane, parts = machine
    run_tiny(plane)
    started = clock.now
    assert sentence(plane) == (
        "serving",
        f"serving on m1 (SIM-GPU-…) since {hms(started)} (0s); nothing to do",
    )
    log = parts.settings.log_dir / "tiny.log"
    supervisor = Supervisor(
        "tiny",
        state=parts.state,
        processes=LocalServerProcesses(),
        log_dir=parts.settings.log_dir,
        now=clock,
    )
    lookup = upstream_from_state(parts.state, "tiny", clock)
    assert supervisor.check() == parts.record()  # it serves: nothing to do

    # SIGKILL: ps sees it at once, before any supervisor records it
    first = parts.record().server
    assert first is not None
    kill(first, signal.SIGKILL)
    killed_at = datetime.fromtimestamp(reaped(first, log)["at"], UTC)
    clock.now = killed_at + timedelta(seconds=4)
    assert sentence(plane) == (
        "exited",
        f"exited on m1 (SIM-GPU-…) since {hms(killed_at)} (4s): its model server was killed by"
        f" signal 9 (SIGKILL) at {hms(killed_at)}; its endpoint restarts it if it runs; if not,"
        " nodeau run tiny starts the endpoint again",
    )
    after = supervisor.check()
    assert after is not None and after.workload.state is WorkloadState.RESTARTING
    assert after.workload.next_attempt == killed_at + timedelta(seconds=10)  # the first step
    assert parts.state.snapshot().ledger.of_workload("tiny") is not None  # the card stays held
    restart_1 = killed_at + timedelta(seconds=10)
    assert sentence(plane) == (
        "restarting",
        f"restarting on m1 (SIM-GPU-…) since {hms(killed_at)} (4s): its model server was killed"
        f" by signal 9 (SIGKILL) at {hms(killed_at)}; restart 1, next attempt at"
        f" {hms(restart_1)}",
    )
    down = lookup()
    assert isinstance(down, Unavailable)
    assert down.message == (
        f"tiny is restarting: its model server was killed by signal 9 (SIGKILL) at"
        f" {hms(killed_at)}; restart 1, next attempt at {hms(restart_1)}"
    )
    assert down.retry_after_s == 7  # 6 s to the next attempt, and 1 for the model to load
    assert supervisor.check() == after  # not due yet: nothing started
    assert live_servers_of(Path(after.model_path)) == []

    # due: started again, on the same model, card and configuration
    clock.now = restart_1
    up = supervisor.check()
    assert up is not None and up.workload.state is WorkloadState.SERVING
    second = up.server
    assert second is not None and second.pid != first.pid and answers(second)
    assert second.command[second.command.index("--model") + 1] == up.model_path
    assert (
        "--n-gpu-layers" in second.command
        and second.command[second.command.index("--n-gpu-layers") + 1] == "0"
    )  # simulated cards: on the CPU, as the first start was
    assert sentence(plane) == (
        "serving",
        f"serving on m1 (SIM-GPU-…) since {hms(restart_1)} (0s), restarted once after its model"
        f" server was killed by signal 9 (SIGKILL) at {hms(killed_at)}; nothing to do",
    )

    # SIGSEGV soon after: the next attempt waits twice as long
    kill(second, signal.SIGSEGV)
    segv_at = datetime.fromtimestamp(reaped(second, log)["at"], UTC)
    clock.now = segv_at + timedelta(seconds=1)
    again = supervisor.check()
    assert again is not None
    restart_2 = segv_at + timedelta(seconds=20)
    assert again.workload.next_attempt == restart_2
    assert sentence(plane) == (
        "restarting",
        f"restarting on m1 (SIM-GPU-…) since {hms(segv_at)} (1s): its model server was killed"
        f" by signal 11 (SIGSEGV) at {hms(segv_at)}; restart 2, next attempt at"
        f" {hms(restart_2)}",
    )

    # a start that fails: the model file is not a model for this attempt
    model = Path(again.model_path)
    kept = tmp_path / "kept.gguf"
    model.rename(kept)
    model.write_bytes(b"GGUF" + bytes(64))
    clock.now = restart_2
    failed = supervisor.check()
    assert failed is not None and failed.workload.state is WorkloadState.RESTARTING
    ended = failed.workload.last_exit
    assert ended is not None and (ended.kind, ended.code, ended.starting) == (
        ExitKind.EXITED,
        1,
        True,
    )
    restart_3 = ended.at + timedelta(seconds=40)
    assert failed.workload.next_attempt == restart_3
    assert sentence(plane) == (
        "restarting",
        f"restarting on m1 (SIM-GPU-…) since {hms(segv_at)} (20s): its model server exited with"
        f" code 1 while starting at {hms(ended.at)}; restart 3, next attempt at {hms(restart_3)}"
        " (nodeau logs tiny shows its log)",
    )
    tail = plane.serving.logs("tiny", 40)
    assert any("failed to load model" in line for line in tail), tail
    assert len(plane.serving.logs("tiny", 3)) == 3

    # the file back: the next attempt serves
    model.unlink()
    kept.rename(model)
    clock.now = restart_3
    back = supervisor.check()
    assert back is not None and back.workload.state is WorkloadState.SERVING
    assert back.server is not None and answers(back.server)
    assert sentence(plane) == (
        "serving",
        f"serving on m1 (SIM-GPU-…) since {hms(restart_3)} (0s), restarted 3 times, last after its"
        f" model server exited with code 1 while starting at {hms(ended.at)}; nothing to do",
    )
    texts = [e.text for e in parts.state.events("tiny")]
    assert texts[-5:-2] == [
        f"its model server was killed by signal 9 (SIGKILL) at {hms(killed_at)}; restart 1,"
        f" next attempt at {hms(restart_1)}",
        f"restart 1: its model server answers again (pid {second.pid}, port {second.port})",
        f"its model server was killed by signal 11 (SIGSEGV) at {hms(segv_at)}; restart 2,"
        f" next attempt at {hms(restart_2)}",
    ]
    assert texts[-2].startswith(f"restart 2 failed: llama-server for tiny ({model}) exited")
    assert texts[-2].endswith(
        f"; restart 3, next attempt at {hms(restart_3)} (nodeau logs tiny shows its log)"
    )
    assert texts[-1] == (
        f"restart 3: its model server answers again (pid {back.server.pid},"
        f" port {back.server.port})"
    )


def test_an_end_nobody_kept_is_said_to_be_unknown(
    machine: tuple[MachinePlane, Parts], clock: Clock[datetime]
) -> None:
    plane, parts = machine
    run_tiny(plane)
    server = parts.record().server
    assert server is not None
    log = parts.settings.log_dir / "tiny.log"
    [reaper] = _pids_naming(str(exit_path(log)))
    os.kill(reaper, signal.SIGKILL)  # its reaper first: nobody is left to keep the status
    kill(server, signal.SIGKILL)
    clock.now = clock.now + timedelta(seconds=30)
    supervisor = Supervisor(
        "tiny", state=parts.state, processes=LocalServerProcesses(status_wait_s=0.1),
        log_dir=parts.settings.log_dir, now=clock,
    )  # fmt: skip
    supervisor.check()
    assert sentence(plane) == (
        "restarting",
        f"restarting on m1 (SIM-GPU-…) since {hms(clock.now)} (0s): its model server's process"
        f" was found gone at {hms(clock.now)} (exit status unknown); restart 1, next attempt at"
        f" {hms(clock.now + timedelta(seconds=10))}",
    )


def test_a_restart_left_half_way_is_stopped_and_made_again(
    machine: tuple[MachinePlane, Parts], clock: Clock[datetime]
) -> None:
    plane, parts = machine
    run_tiny(plane)
    first = parts.record().server
    assert first is not None
    kill(first, signal.SIGKILL)
    watch = LocalServerProcesses()
    gone = Supervisor(
        "tiny", state=parts.state, processes=watch, log_dir=parts.settings.log_dir, now=clock
    )
    restarting = gone.check()
    assert restarting is not None and restarting.workload.state is WorkloadState.RESTARTING
    # a supervisor launched a server and went away before it answered: recorded, not serving
    leftover = parts.runtime.start(_spec_of(restarting, parts.settings.log_dir), 60.0)
    parts.state.update("tiny", lambda r: evolve(r, server=leftover))
    fresh = Supervisor(
        "tiny", state=parts.state, processes=watch, log_dir=parts.settings.log_dir, now=clock
    )
    still = fresh.check()
    assert still is not None and still.workload.state is WorkloadState.RESTARTING
    assert not server_alive(leftover)  # stopped: nobody knew whether it answered
    assert restarting.workload.next_attempt is not None
    clock.now = restarting.workload.next_attempt
    up = fresh.check()
    assert up is not None and up.workload.state is WorkloadState.SERVING
    assert up.server is not None and up.server.pid not in (first.pid, leftover.pid)


def _spec_of(record: WorkloadRecord, log_dir: Path) -> Any:
    from nodeau.ports.runtime import ServerSpec

    return ServerSpec(
        name=record.workload.name,
        model_path=Path(record.model_path),
        config=record.config,
        gpu_uuid=None,
        log_path=log_dir / f"{record.workload.name}.log",
    )


def test_stopping_while_restarting_frees_the_card_and_nothing_is_restarted(
    machine: tuple[MachinePlane, Parts], clock: Clock[datetime]
) -> None:
    plane, parts = machine
    run_tiny(plane)
    server = parts.record().server
    assert server is not None
    kill(server, signal.SIGKILL)
    supervisor = Supervisor(
        "tiny", state=parts.state, processes=LocalServerProcesses(),
        log_dir=parts.settings.log_dir, now=clock,
    )  # fmt: skip
    supervisor.check()
    said = plane.serving.stop("tiny", workload=False)
    assert said == (
        "tiny: endpoint stopped; its model server is restarting, and nothing restarts it until"
        " nodeau run tiny starts the endpoint again (--workload frees the card)"
    )
    run_tiny(plane)  # a restarting service run again: its endpoint comes back
    assert parts.endpoints.running == {"tiny": 18001}
    assert plane.serving.stop("tiny", workload=True).endswith(f"{CARD} is free")
    clock.now = clock.now + timedelta(hours=1)
    after = supervisor.check()
    assert after is not None and after.workload.state is WorkloadState.STOPPED
    assert plane.serving.workloads() == ()
    assert live_servers_of(Path(after.model_path)) == []


# -- a batch job


class NoWorker(HomeJobs):
    """The job's real files; its worker is run by the test itself, in this process."""

    def start_worker(self, name: str) -> int:
        return 0


def test_a_batch_job_whose_server_dies_mid_run_resumes_and_answers_each_request_once(
    machine: tuple[MachinePlane, Parts],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plane, parts = machine
    requests = tuple(
        BatchRequest(
            line_no=n,
            custom_id=f"r{n}",
            url="/v1/chat/completions",
            body={"messages": [{"role": "user", "content": f"hello {n}"}], "max_tokens": 4},
        )
        for n in range(1, 9)
    )
    monkeypatch.setattr(parts, "jobs", NoWorker(parts.settings.home))
    outcome = plane.batches.submit(
        BatchAsk(
            model="tiny", name="job", task=Task.CHAT, context_tokens=256, requests=requests,
            problems=(), source="jobs.jsonl", unproved=True,
        )
    )  # fmt: skip
    assert isinstance(outcome, BatchSubmitted)
    first = parts.record("job").server
    assert first is not None

    killed: list[str] = []

    class KillingFirst:
        """The real sender, killing the first server as request r3 goes out."""

        def __init__(self, server: RunningServer) -> None:
            self.real = batch_worker.http_sender(server)

        def send(self, job: str, request: BatchRequest) -> BatchResult:
            if request.custom_id == "r3" and not killed:
                killed.append(request.custom_id)
                kill(first, signal.SIGKILL)  # the server ends as this request goes out
            return self.real.send(job, request)

        def answering(self) -> bool:
            return self.real.answering()

        def close(self) -> None:
            self.real.close()

    fast = RestartPolicy(first_delay=timedelta(seconds=0.2), max_delay=timedelta(seconds=1))
    code = batch_worker.run_in_home(
        "job", parts.settings.home, policy=fast, now=lambda: datetime.now(UTC), every_s=0.1,
        sender=KillingFirst,
    )  # fmt: skip
    assert code == 0
    lines = list(plane.batches.results("job"))
    assert sorted(str(line["custom_id"]) for line in lines) == [f"r{n}" for n in range(1, 9)]
    for line in lines:
        response = line["response"]
        assert isinstance(response, dict) and response["status_code"] == 200, line
        assert line["error"] is None
    assert [line["custom_id"] for line in lines if line.get("retried")] == ["r3"]
    [job] = plane.batches.status("job")
    assert (job.state, job.done, job.failed, job.left) == ("succeeded", 8, 0, 0)
    record = parts.record("job")
    assert (record.workload.restarts, record.server) == (1, None)
    assert parts.state.snapshot().ledger.of_workload("job") is None  # the card is free
    events = [e.text for e in parts.state.events("job")]
    assert any(t.startswith("its model server was killed by signal 9 (SIGKILL) at") for t in events)
    assert any(t.startswith("restart 1: its model server answers again") for t in events)
    assert processes.alive(processes.OurProcess(pid=first.pid, command=first.command)) is False
