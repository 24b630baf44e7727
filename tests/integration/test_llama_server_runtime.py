"""The model server runtimes on real servers, serving tiny GGUF models.

``runtime`` tests are the ModelRuntime contract on llama-server and llama-cpp-python's server;
``llama_runtime`` tests are llama-server's own. A missing binary fails, never skips. The models
are random (answers are noise: the process, flags and routes are checked, not meaning).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import attrs
import httpx
import pytest
from gguf import GGUFValueType, Keys

from nodeau.adapters import model_server_process
from nodeau.adapters.llama_build import RECORD
from nodeau.adapters.llama_server import (
    SOURCE_NVML,
    SOURCE_RSS_SIMULATED,
    SOURCE_RSS_UNLISTED,
    LlamaServerRuntime,
    find_llama_server,
    server_command,
    server_environment,
)
from nodeau.adapters.model_server_process import ServerProcessRuntime
from nodeau.domain.memory import CacheType, RuntimeConfig, kv_cells
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import RunningServer, RuntimeFailure, ServerSpec
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.live_processes import naming
from tests.support.real.llama import llama_cpp_python_runtime, llama_server_binary

READY_S = 60.0  # generous: a tiny model is ready in well under a second


@pytest.fixture(scope="module")
def binary() -> Path:
    return llama_server_binary()


@pytest.fixture
def llama_runtime(binary: Path) -> LlamaServerRuntime:
    return LlamaServerRuntime(binary)


@pytest.fixture(params=["llama-server", "llama-cpp-python"])
def runtime(request: pytest.FixtureRequest) -> ServerProcessRuntime:
    """Each runtime in turn: the contract every model server runtime keeps."""
    if request.param == "llama-server":
        return LlamaServerRuntime(request.getfixturevalue("binary"))
    return llama_cpp_python_runtime()


@pytest.fixture
def servers() -> Iterator[list[RunningServer]]:
    """Servers a test started; whatever happens, none outlives the test (any runtime stops
    any server: stopping needs only the pid and the command line)."""
    started: list[RunningServer] = []
    yield started
    for server in started:
        LlamaServerRuntime(Path("llama-server")).stop(server, grace_s=2.0)


def tiny_model(tmp_path: Path, quant: str = "f32", **kwargs: object) -> Path:
    path = tmp_path / f"tiny-{quant}.gguf"
    return write_tiny_llama(path, quant=quant, **kwargs)  # type: ignore[arg-type]


def spec_for(tmp_path: Path, model: Path, name: str = "tiny", **config: object) -> ServerSpec:
    return ServerSpec(
        name=name,
        model_path=model,
        config=RuntimeConfig(**{"context_tokens": 256, **config}),  # type: ignore[arg-type]
        gpu_uuid=None,
        log_path=tmp_path / "logs" / f"{name}.log",
    )


def client(server: RunningServer) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url, headers=server.auth_headers, trust_env=False, timeout=30.0
    )


def live_servers_of(model: Path) -> list[int]:
    """Pids of running processes whose command line names ``model``."""
    return naming(model)


# -- the command line and environment (no process) ---------------------------------------------


def test_the_command_passes_every_admitted_setting(tmp_path: Path) -> None:
    spec = ServerSpec(
        name="qwen",
        model_path=tmp_path / "m.gguf",
        config=RuntimeConfig(
            context_tokens=8192,
            parallel=2,
            batch=1024,
            ubatch=256,
            cache_type_k=CacheType.Q8_0,
            cache_type_v=CacheType.Q4_0,
            flash_attention=True,
        ),
        gpu_uuid="GPU-6a2b3c4d-0000-1111-2222-333344445555",
        log_path=tmp_path / "log",
    )
    assert server_command(Path("/opt/llama-server"), spec, 41000) == (
        "/opt/llama-server",
        "--model", str(tmp_path / "m.gguf"),
        "--alias", "qwen",
        "--host", "127.0.0.1",
        "--port", "41000",
        "--ctx-size", "8192",
        "--parallel", "2",
        "--kv-unified",
        "--batch-size", "1024",
        "--ubatch-size", "256",
        "--cache-type-k", "q8_0",
        "--cache-type-v", "q4_0",
        "--flash-attn", "on",
        "--n-gpu-layers", "999",
        "--fit", "off",
        "--no-ui",
        "--cors-origins", "http://nodeau.invalid",
        "--no-cors-credentials",
        "--offline",
        "--log-colors", "off",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("task", "extra"),
    [
        (Task.CHAT, ()),
        (Task.EMBED, ("--embeddings",)),
        (Task.RERANK, ("--rerank", "--embeddings", "--pooling", "rank")),
    ],
)
def test_the_task_picks_the_server_mode(tmp_path: Path, task: Task, extra: tuple[str, ...]) -> None:
    spec = spec_for(tmp_path, tmp_path / "m.gguf", task=task)
    command = server_command(Path("llama-server"), spec, 1)
    assert command[command.index("--log-colors") + 2 :] == extra
    assert command[command.index("--n-gpu-layers") + 1] == "0"
    assert command[command.index("--flash-attn") + 1] == "off"


def test_a_name_with_a_comma_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="comma"):
        server_command(Path("llama-server"), spec_for(tmp_path, tmp_path / "m", name="a,b"), 1)


def test_the_environment_shows_only_the_card_and_drops_llama_arg_variables() -> None:
    base = {"PATH": "/bin", "LLAMA_ARG_N_PARALLEL": "8", "NVIDIA_VISIBLE_DEVICES": "all"}
    assert server_environment(base, "GPU-1") == {
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "GPU-1",
        "NVIDIA_VISIBLE_DEVICES": "GPU-1",
    }
    assert server_environment(base, None) == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": ""}


def test_find_llama_server_prefers_the_setting_then_path_then_a_finished_install(
    tmp_path: Path,
) -> None:
    def executable(path: Path, *, finished: bool = True) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        if finished:
            (path.parents[1] / RECORD).write_text("{}")
        return path

    cache = tmp_path / "cache"
    old = executable(cache / "0.3.9" / "cpu" / "bin" / "llama-server")
    new = executable(cache / "0.3.36" / "cpu" / "bin" / "llama-server")
    executable(cache / "0.3.40" / "cpu" / "bin" / "llama-server", finished=False)
    cuda = executable(cache / "0.3.36" / "cuda-90" / "bin" / "llama-server")
    on_path = executable(tmp_path / "bin" / "llama-server")
    env = {"PATH": str(tmp_path / "bin"), "NODEAU_LLAMA_CACHE": str(cache)}
    assert find_llama_server({**env, "NODEAU_LLAMA_SERVER": "/nowhere/llama-server"}) == Path(
        "/nowhere/llama-server"
    )
    assert find_llama_server(env) == on_path
    bare = {**env, "PATH": str(tmp_path / "empty")}
    # an unfinished build (no record) is never chosen; the newest finished one is
    assert find_llama_server(bare) == new != old
    assert find_llama_server(bare, prefer_cuda=True) == cuda
    assert find_llama_server({"PATH": "", "HOME": str(tmp_path / "nohome")}) is None
    home = tmp_path / "home"
    built = executable(home / ".cache/nodeau/llama-server/0.3.36/cpu/bin/llama-server")
    assert find_llama_server({"PATH": "", "HOME": str(home)}) == built
    xdg = executable(tmp_path / "xdg/nodeau/llama-server/0.3.36/cpu/bin/llama-server")
    assert (
        find_llama_server({"PATH": "", "HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "xdg")})
        == xdg
    )


# -- a real server -----------------------------------------------------------------------------


@pytest.mark.parametrize("quant", ["q8_0", "f32"])
def test_a_chat_server_starts_answers_reports_memory_and_stops(
    tmp_path: Path,
    runtime: ServerProcessRuntime,
    servers: list[RunningServer],
    quant: str,
) -> None:
    model = tiny_model(tmp_path, quant, context=4096)
    spec = spec_for(tmp_path, model, context_tokens=512)
    server = runtime.start(spec, READY_S)
    servers.append(server)
    assert server.command == runtime.command(spec, server.port)
    assert isinstance(server.started_at, datetime) and server.started_at.tzinfo is not None
    assert runtime.alive(server)
    with client(server) as http:
        answer = http.post(
            "/v1/chat/completions",
            json={
                "model": "tiny",
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
                "temperature": 0,
            },
        )
        assert answer.status_code == 200
        body = answer.json()
        assert body["model"] == "tiny"
        assert isinstance(body["choices"][0]["message"]["content"], str)
        assert body["usage"]["completion_tokens"] >= 1
        models = http.get("/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["tiny"]
    used = runtime.memory(server)
    assert used is not None
    assert used.source == SOURCE_RSS_SIMULATED
    assert used.bytes > model.stat().st_size
    assert "--- nodeau:" in spec.log_path.read_text()

    runtime.stop(server, grace_s=10.0)
    assert not runtime.alive(server)
    assert runtime.memory(server) is None
    assert live_servers_of(model) == []
    runtime.stop(server, grace_s=10.0)  # stopping a gone server is fine
    assert not runtime.alive(server)


def test_the_real_server_takes_a_split_and_answers(
    tmp_path: Path, llama_runtime: LlamaServerRuntime, servers: list[RunningServer]
) -> None:
    """The split's flags are ones the real llama-server takes: with no card visible (this
    CPU build has none) it serves the whole model itself."""
    model = tiny_model(tmp_path, context=512, n_layers=4)
    spec = attrs.evolve(
        spec_for(tmp_path, model), gpu_uuid="GPU-b", split=(("GPU-b", 3), ("GPU-a", 2))
    )
    server = llama_runtime.start(spec, READY_S)
    servers.append(server)
    assert server.command[-4:] == ("--split-mode", "layer", "--tensor-split", "3,2")
    with client(server) as http:
        answer = http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Hi."}], "max_tokens": 2},
        )
        assert answer.status_code == 200
    llama_runtime.stop(server, grace_s=10.0)
    assert live_servers_of(model) == []


@pytest.mark.parametrize(
    ("context", "parallel", "served"),
    [(256, 1, 256), (1024, 1, 1024), (1024, 4, 1024), (300, 1, 512), (100, 2, 256)],
)
def test_the_served_context_is_the_padded_configured_context(
    tmp_path: Path,
    llama_runtime: LlamaServerRuntime,
    servers: list[RunningServer],
    context: int,
    parallel: int,
    served: int,
) -> None:
    """With --kv-unified every slot may use the whole cache, whose size is the configured
    context padded to 256 cells: what nodeau.domain.memory.kv_cells counts."""
    spec = spec_for(
        tmp_path, tiny_model(tmp_path, context=4096), context_tokens=context, parallel=parallel
    )
    server = llama_runtime.start(spec, READY_S)
    servers.append(server)
    with client(server) as http:
        assert http.get("/health").json() == {"status": "ok"}
        props = http.get("/props").json()
        slots = http.get("/slots").json()
    assert props["default_generation_settings"]["n_ctx"] == served == kv_cells(spec.config)
    assert props["total_slots"] == parallel
    assert [s["n_ctx"] for s in slots] == [served] * parallel


def test_the_server_outlives_the_process_that_started_it(
    tmp_path: Path, runtime: ServerProcessRuntime, servers: list[RunningServer]
) -> None:
    """A starter process starts the server as ``nodeau run`` does (the runtime the product
    chooses, given the same setting) and exits; the server keeps serving."""
    model = tiny_model(tmp_path)
    starter = """
import json, os, sys
from pathlib import Path
from nodeau.domain.memory import RuntimeConfig
from nodeau.ports.runtime import ServerSpec
model, log = sys.argv[1:3]
spec = ServerSpec(name="tiny", model_path=Path(model), config=RuntimeConfig(context_tokens=256),
                  gpu_uuid=None, log_path=Path(log))
from nodeau.adapters.llama_cpp_python import LlamaCppPythonRuntime
from nodeau.adapters.llama_server import LlamaServerRuntime, ModelServer
from nodeau.adapters.this_machine import model_server
c = model_server(os.environ)
rt = (LlamaCppPythonRuntime(c.program, library=c.library)
      if c.server is ModelServer.LLAMA_CPP_PYTHON else LlamaServerRuntime(c.program))
s = rt.start(spec, 60)
print(json.dumps({"pid": s.pid, "port": s.port, "at": s.started_at.isoformat(),
                  "command": s.command, "server": c.server.value, "key": s.api_key}))
"""
    env = dict(os.environ)
    if isinstance(runtime, LlamaServerRuntime):
        env["NODEAU_LLAMA_SERVER"] = runtime.command(spec_for(tmp_path, model), 1)[0]
    else:  # as the embedded server is chosen: nothing of ours installed, its library named
        env.pop("NODEAU_LLAMA_SERVER", None)
        env["PATH"] = str(Path(sys.executable).parent)  # no llama-server on it
        env["NODEAU_LLAMA_CACHE"] = str(tmp_path / "no-installs")
        env.setdefault("LLAMA_CPP_LIB_PATH", str(llama_server_binary().parent))
    done = subprocess.run(
        [sys.executable, "-c", starter, str(model), str(tmp_path / "s.log")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    kind = "llama-server" if isinstance(runtime, LlamaServerRuntime) else "llama-cpp-python"
    assert said["server"] == kind
    server = RunningServer(
        pid=said["pid"],
        port=said["port"],
        started_at=datetime.fromisoformat(said["at"]),
        command=tuple(said["command"]),
        api_key=said["key"],
    )
    servers.append(server)
    assert runtime.alive(server)  # its starter has exited; the model keeps serving
    with client(server) as http:
        assert http.get(runtime.ready_path).status_code == 200
    runtime.stop(server, grace_s=10.0)
    assert not runtime.alive(server)


def test_an_embedding_server_answers_with_a_vector(
    tmp_path: Path, runtime: ServerProcessRuntime, servers: list[RunningServer]
) -> None:
    # the model declares its pooling (mean), as converted embedding models do
    pooling = {Keys.LLM.POOLING_TYPE.format(arch="llama"): (1, GGUFValueType.UINT32)}
    model = tiny_model(tmp_path, override_keys=pooling)
    server = runtime.start(spec_for(tmp_path, model, name="embed", task=Task.EMBED), READY_S)
    servers.append(server)
    with client(server) as http:
        answer = http.post("/v1/embeddings", json={"model": "embed", "input": "hello world"})
    assert answer.status_code == 200
    vector = answer.json()["data"][0]["embedding"]
    assert len(vector) == 64  # the tiny model's n_embd
    assert all(isinstance(x, float) for x in vector)


def test_a_rerank_server_scores_documents(
    tmp_path: Path, llama_runtime: LlamaServerRuntime, servers: list[RunningServer]
) -> None:
    model = tiny_model(tmp_path)
    server = llama_runtime.start(
        spec_for(tmp_path, model, name="rerank", task=Task.RERANK), READY_S
    )
    servers.append(server)
    with client(server) as http:
        answer = http.post(
            "/v1/rerank", json={"model": "rerank", "query": "a", "documents": ["b", "c"]}
        )
    assert answer.status_code == 200
    assert sorted(r["index"] for r in answer.json()["results"]) == [0, 1]


# -- failures ----------------------------------------------------------------------------------


BAD_MODEL_SAYS = {
    "llama-server": "invalid magic characters",
    "llama-cpp-python's server": "Failed to load model from file",
}


def test_a_bad_model_file_fails_at_once_naming_the_problem(
    tmp_path: Path, runtime: ServerProcessRuntime
) -> None:
    model = tmp_path / "bad.gguf"
    model.write_bytes(b"NOTGGUF!" + bytes(1000))
    with pytest.raises(RuntimeFailure) as caught:
        runtime.start(spec_for(tmp_path, model, name="bad"), READY_S)
    message = str(caught.value)
    assert "\n" not in message
    assert f"{runtime.server_name} for bad" in message and "exited while starting" in message
    assert BAD_MODEL_SAYS[runtime.server_name] in message and str(model) in message
    assert f"(log: {tmp_path / 'logs' / 'bad.log'})" in message
    assert live_servers_of(model) == []


def test_a_missed_readiness_deadline_leaves_no_process(
    tmp_path: Path, runtime: ServerProcessRuntime, servers: list[RunningServer]
) -> None:
    """The deadline passes before the first readiness check can be made."""
    model = tiny_model(tmp_path)
    with pytest.raises(RuntimeFailure, match=r"was not ready within 0\.001 s") as caught:
        servers.append(runtime.start(spec_for(tmp_path, model), 0.001))  # stopped if it starts
    assert "\n" not in str(caught.value)
    assert live_servers_of(model) == []


def test_a_missing_model_is_said_plainly(tmp_path: Path, runtime: ServerProcessRuntime) -> None:
    missing = tmp_path / "absent.gguf"
    with pytest.raises(RuntimeFailure, match=f"^{missing}: no such model file$"):
        runtime.start(spec_for(tmp_path, missing), READY_S)


def test_a_missing_binary_is_said_plainly(tmp_path: Path) -> None:
    nowhere = LlamaServerRuntime(tmp_path / "no-llama-server")
    with pytest.raises(
        RuntimeFailure, match="no llama-server executable there; build one with `nodeau server"
    ):
        nowhere.start(spec_for(tmp_path, tiny_model(tmp_path)), READY_S)


def test_a_port_taken_before_the_server_binds_is_retried(
    tmp_path: Path,
    runtime: ServerProcessRuntime,
    servers: list[RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        real = model_server_process.free_port
        monkeypatch.setattr(model_server_process, "free_port", lambda: next(ports, None) or real())
        server = runtime.start(spec_for(tmp_path, tiny_model(tmp_path)), READY_S)
        servers.append(server)
    assert server.port != busy
    assert runtime.bind_failure in (tmp_path / "logs" / "tiny.log").read_text()
    assert runtime.alive(server)


class AnswersEverything(BaseHTTPRequestHandler):
    """Another process's server: 200 to every GET, whatever the path (a ready model server
    of someone else's on the port our server was given)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def test_a_port_held_by_a_ready_foreign_server_is_not_taken_for_ours(
    tmp_path: Path,
    runtime: ServerProcessRuntime,
    servers: list[RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The foreign server answers the readiness GET at once, before ours has even failed to
    # bind: only a port our own process listens on counts as ours being ready.
    foreign = ThreadingHTTPServer(("127.0.0.1", 0), AnswersEverything)
    thread = threading.Thread(target=foreign.serve_forever, daemon=True)
    thread.start()
    try:
        busy = foreign.server_address[1]
        ports = iter([busy])
        real = model_server_process.free_port
        monkeypatch.setattr(model_server_process, "free_port", lambda: next(ports, None) or real())
        server = runtime.start(spec_for(tmp_path, tiny_model(tmp_path)), READY_S)
        servers.append(server)
    finally:
        foreign.shutdown()
        foreign.server_close()
    assert server.port != busy
    assert runtime.bind_failure in (tmp_path / "logs" / "tiny.log").read_text()
    assert runtime.alive(server)
    answer = httpx.get(server.base_url + runtime.ready_path, headers=server.auth_headers, timeout=5)
    assert answer.status_code == 200


def test_stopping_without_grace_still_ends_the_server(
    tmp_path: Path, runtime: ServerProcessRuntime, servers: list[RunningServer]
) -> None:
    server = runtime.start(spec_for(tmp_path, tiny_model(tmp_path)), READY_S)
    servers.append(server)
    runtime.stop(server, grace_s=0.0)
    assert not runtime.alive(server)


def test_a_pid_running_something_else_is_not_the_server(runtime: ServerProcessRuntime) -> None:
    impostor = RunningServer(
        pid=os.getpid(),
        port=1,
        started_at=datetime.fromisoformat("2026-01-01T00:00:00+00:00"),
        command=("llama-server", "--model", "x.gguf"),
    )
    assert not runtime.alive(impostor)
    assert runtime.memory(impostor) is None
    runtime.stop(impostor, grace_s=0.0)  # never signals a process that is not the server
    assert Path(f"/proc/{os.getpid()}").exists()


def test_memory_is_the_inventorys_figure_for_the_server_pid_else_its_rss_labelled_unlisted(
    tmp_path: Path, runtime: ServerProcessRuntime, servers: list[RunningServer]
) -> None:
    """No GPU here: a dict stands in for the inventory's per-pid figure (NVML's on a GPU
    machine, tests/contract/test_gpu_inventory.py). With a real server running, its memory
    is that figure, labelled NVML; where the inventory lists nothing for the pid it is the
    process's RSS, labelled as unlisted and not as simulated hardware."""
    figures: dict[int, int | None] = {}
    gpu_runtime: ServerProcessRuntime = (
        LlamaServerRuntime(Path(runtime.command(spec_for(tmp_path, tmp_path), 1)[0]),
                           inventory_memory=figures.get)
        if isinstance(runtime, LlamaServerRuntime)
        else llama_cpp_python_runtime(inventory_memory=figures.get)
    )  # fmt: skip
    server = gpu_runtime.start(spec_for(tmp_path, tiny_model(tmp_path)), READY_S)
    servers.append(server)
    figures[server.pid] = 123 * 1024 * 1024
    used = gpu_runtime.memory(server)
    assert used is not None and (used.bytes, used.source) == (123 * 1024 * 1024, SOURCE_NVML)
    figures[server.pid] = None
    unlisted = gpu_runtime.memory(server)
    assert unlisted is not None and unlisted.source == SOURCE_RSS_UNLISTED
    assert unlisted.bytes > 0
