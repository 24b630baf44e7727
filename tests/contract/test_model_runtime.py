"""The ``ModelRuntime`` contract: the fake the use-case tests use, and llama-server.

The real server's own behaviours (command line, readiness, ports, memory from
NVML) are tested in tests/integration/test_llama_server_runtime.py; this suite
holds what every runtime, fake or real, must do for the planes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeau.adapters.llama_server import LlamaServerRuntime, find_llama_server
from nodeau.domain.memory import RuntimeConfig
from nodeau.ports.runtime import ModelRuntime, RunningServer, RuntimeFailure, ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.fakes.fake_runtime import FakeModelRuntime


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture(params=["fake", "llama-server"])
def runtime(request: pytest.FixtureRequest) -> Iterator[ModelRuntime]:
    if request.param == "fake":
        yield FakeModelRuntime(now)
        return
    binary = find_llama_server(os.environ)
    if binary is None:
        pytest.fail("no llama-server: run `nodeau server install --cpu` (README)")
    yield LlamaServerRuntime(binary)


def spec(tmp_path: Path, model: Path) -> ServerSpec:
    return ServerSpec(
        name="tiny",
        model_path=model,
        config=RuntimeConfig(context_tokens=256),
        gpu_uuid=None,
        log_path=tmp_path / "tiny.log",
    )


def test_a_started_server_is_alive_holds_memory_and_is_gone_once_stopped(
    tmp_path: Path, runtime: ModelRuntime
) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=1)
    server = runtime.start(spec(tmp_path, model), 60)
    try:
        assert runtime.alive(server)
        held = runtime.memory(server)
        assert held is not None and held.bytes > 0 and held.source
    finally:
        runtime.stop(server, grace_s=5)
    assert not runtime.alive(server)
    assert runtime.memory(server) is None
    runtime.stop(server, grace_s=5)  # a gone server is fine


def test_a_missing_model_file_is_a_runtime_failure_naming_it(
    tmp_path: Path, runtime: ModelRuntime
) -> None:
    missing = tmp_path / "missing.gguf"
    with pytest.raises(RuntimeFailure, match=r"missing\.gguf"):
        runtime.start(spec(tmp_path, missing), 10)


def test_a_server_that_was_never_started_is_not_alive(runtime: ModelRuntime) -> None:
    ghost = RunningServer(pid=2**22 - 3, port=1, started_at=now(), command=("ghost",))
    assert not runtime.alive(ghost)
    assert runtime.memory(ghost) is None
