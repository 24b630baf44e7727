"""The model runtime: llama.cpp's ``llama-server`` as a real process on a free loopback port.

Why it is so: docs/adr/decisions/adapters.md (llama_server.py).
"""

from __future__ import annotations

import enum
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from attrs import frozen
from returns.result import Failure, Result, Success

from nodeau.adapters import server_search
from nodeau.adapters.model_server_process import (
    HOST,
    SOURCE_NVML,
    SOURCE_RSS_SIMULATED,
    SOURCE_RSS_UNLISTED,
    LocalServerProcesses,
    ServerProcessRuntime,
    free_port,
    log_excerpt,
)
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import RuntimeFailure, ServerSpec

__all__ = [
    "HOST",
    "SOURCE_NVML",
    "SOURCE_RSS_SIMULATED",
    "SOURCE_RSS_UNLISTED",
    "LlamaServerRuntime",
    "LocalRelaunch",
    "LocalServerProcesses",
    "ModelServer",
    "RuntimeChoice",
    "choose_runtime",
    "find_llama_server",
    "free_port",
    "log_excerpt",
    "relaunch_for",
    "server_cache",
    "server_command",
    "server_environment",
]

BINARY_ENV = "NODEAU_LLAMA_SERVER"
CACHE_ENV = "NODEAU_LLAMA_CACHE"  # where ``nodeau server install`` builds (see server_cache)
LIB_ENV = "LLAMA_CPP_LIB_PATH"  # where llama-cpp-python loads libllama from
INSTALL = "nodeau server install"
BUILD_HINT = f"build one with `{INSTALL}` or set NODEAU_LLAMA_SERVER"
NO_SERVER = (
    f"no model server found: run `{INSTALL}` (it builds llama.cpp's llama-server into your "
    "cache, with CUDA where this machine has NVIDIA cards), or set NODEAU_LLAMA_SERVER to a "
    "llama-server, or put llama-server on PATH"
)
ALL_LAYERS = "999"  # more layers than any model has: every layer on the card
NO_ORIGIN = "http://nodeau.invalid"  # the only origin the server allows: no page has it

_VERSION_PART = re.compile(r"\d+")
_LIBLLAMA = "libllama.so"


class ModelServer(enum.Enum):
    """The model servers Nodeau runs."""

    LLAMA_SERVER = "llama-server"
    LLAMA_CPP_PYTHON = "llama-cpp-python"


@frozen(kw_only=True)
class RuntimeChoice:
    """Which model server serves, the program that runs it, and why it was chosen."""

    server: ModelServer
    program: Path  # the llama-server binary, or the Python that runs ``-m llama_cpp.server``
    library: Path | None  # llama-cpp-python: the folder with libllama; None: the package's own
    reason: str


def choose_runtime(
    env: Mapping[str, str],
    *,
    prefer_cuda: bool = False,
    has_llama_cpp: Callable[[], bool] | None = None,
    python: Path | None = None,
) -> Result[RuntimeChoice, str]:
    """The model server to use, in this order: ``$NODEAU_LLAMA_SERVER`` when set;
    ``llama-server`` on ``$PATH``; the newest build of ``nodeau server install`` (a CUDA one
    first when ``prefer_cuda``: this machine has NVIDIA cards; a CPU one first otherwise);
    llama-cpp-python's server when the ``llama_cpp`` package is installed (with libllama
    from ``$LLAMA_CPP_LIB_PATH`` or the package itself). Failure: how to get one.

    ``has_llama_cpp`` (default: whether this Python finds the package, without importing it)
    and ``python`` (default: this Python) are for tests."""
    chosen = env.get(BINARY_ENV, "").strip()
    if chosen:
        return Success(_llama_server(Path(chosen).expanduser(), f"{BINARY_ENV} is set"))
    on_path = shutil.which("llama-server", path=env.get("PATH", os.defpath))
    if on_path:
        return Success(_llama_server(Path(on_path), "llama-server is on PATH"))
    built = installed_builds(env, prefer_cuda=prefer_cuda)
    if built:
        flavour = built[0].parents[1].name
        return Success(_llama_server(built[0], f"the newest `{INSTALL}` build ({flavour})"))
    found = has_llama_cpp() if has_llama_cpp is not None else _llama_cpp_installed()
    if found:
        usable, library = _llama_cpp_library(env, None)
        if not usable:
            return Failure(
                f"the llama_cpp package has no libllama here: set {LIB_ENV}; {NO_SERVER}"
            )
        return Success(
            RuntimeChoice(
                server=ModelServer.LLAMA_CPP_PYTHON,
                program=python or Path(sys.executable),
                library=library,
                reason="no llama-server configured, on PATH or installed; the llama_cpp package is",
            )
        )
    return Failure(NO_SERVER)


def _llama_server(binary: Path, reason: str) -> RuntimeChoice:
    return RuntimeChoice(
        server=ModelServer.LLAMA_SERVER, program=binary, library=None, reason=reason
    )


def _llama_cpp_installed() -> bool:
    """Whether this Python finds the ``llama_cpp`` package (importing it would load libllama)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _llama_cpp_library(env: Mapping[str, str], built: Path | None) -> tuple[bool, Path | None]:
    """Where llama-cpp-python's server loads libllama from: ``$LLAMA_CPP_LIB_PATH`` when set,
    else the package's own ``lib`` folder when it has one (None), else the ``bin`` folder of
    ``built`` (a llama-server build); (False, None) when there is none."""
    chosen = env.get(LIB_ENV, "").strip()
    if chosen:
        return True, Path(chosen).expanduser()
    spec = importlib.util.find_spec("llama_cpp")
    origin = spec.origin if spec is not None else None
    if origin is not None and (Path(origin).parent / "lib" / _LIBLLAMA).exists():
        return True, None
    return built is not None, built.parent if built is not None else None


def find_llama_server(env: Mapping[str, str], *, prefer_cuda: bool = False) -> Path | None:
    """The llama-server to use: ``$NODEAU_LLAMA_SERVER`` when set (even if it is not there:
    an explicit choice is never silently replaced), else ``llama-server`` on ``$PATH``, else
    the newest ``nodeau server install`` build (``installed_builds``)."""
    chosen = env.get(BINARY_ENV, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    on_path = shutil.which("llama-server", path=env.get("PATH", os.defpath))
    if on_path:
        return Path(on_path)
    built = installed_builds(env, prefer_cuda=prefer_cuda)
    return built[0] if built else None


def server_cache(env: Mapping[str, str]) -> Path:
    """Where ``nodeau server install`` builds: ``$NODEAU_LLAMA_CACHE``, else
    ``$XDG_CACHE_HOME/nodeau/llama-server`` (an absolute one), else ``~/.cache/nodeau/...``."""
    root = env.get(CACHE_ENV, "").strip()
    return Path(root).expanduser() if root else cache_home(env) / "llama-server"


def cache_home(env: Mapping[str, str]) -> Path:
    """Nodeau's own cache folder (XDG): ``$XDG_CACHE_HOME/nodeau`` or ``~/.cache/nodeau``."""
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else _home(env) / ".cache"
    return base / "nodeau"


def installed_builds(env: Mapping[str, str], *, prefer_cuda: bool) -> tuple[Path, ...]:
    """The llama-servers ``nodeau server install`` finished (each has its record), best
    first: CUDA builds before CPU ones when ``prefer_cuda``, CPU ones first otherwise; the
    newer llama-cpp-python version first within each."""
    from nodeau.adapters.llama_build import RECORD

    found = [
        p
        for p in server_cache(env).glob("*/*/bin/llama-server")
        if os.access(p, os.X_OK) and (p.parents[1] / RECORD).is_file()
    ]

    def rank(binary: Path) -> tuple[bool, tuple[int, ...]]:
        cuda = binary.parents[1].name.startswith("cuda")
        return (cuda != prefer_cuda, tuple(-n for n in _version_key(binary.parents[2].name)))

    return tuple(sorted(found, key=rank))


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME", "").strip()
    return Path(home) if home else Path.home()


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in _VERSION_PART.findall(name))


def server_command(binary: Path, spec: ServerSpec, port: int) -> tuple[str, ...]:
    """The exact command line that serves ``spec`` on ``port``."""
    if "," in spec.name:
        raise ValueError(f"workload name {spec.name!r} has a comma (llama-server splits aliases)")
    c = spec.config
    command = [
        str(binary),
        "--model", str(spec.model_path),
        "--alias", spec.name,
        "--host", HOST,
        "--port", str(port),
        "--ctx-size", str(c.context_tokens),
        "--parallel", str(c.parallel),
        "--kv-unified",
        "--batch-size", str(c.batch),
        "--ubatch-size", str(c.ubatch),
        "--cache-type-k", c.cache_type_k.value,
        "--cache-type-v", c.cache_type_v.value,
        "--flash-attn", "on" if c.flash_attention else "off",
        "--n-gpu-layers", ALL_LAYERS if spec.gpu_uuid is not None else "0",
        "--fit", "off",
        "--no-ui",
        # no web page may read it: the endpoint is the only way in for a browser
        "--cors-origins", NO_ORIGIN,
        "--no-cors-credentials",
        "--offline",
        "--log-colors", "off",
    ]  # fmt: skip
    if spec.split:  # whole slot counts place exactly those layers on each card, in order
        counts = ",".join(str(count) for _, count in spec.split)
        command += ["--split-mode", "layer", "--tensor-split", counts]
    if spec.log_buffers:
        command += ["--log-verbosity", "4"]  # below 4 the buffer sizes are not logged
    if c.task is Task.EMBED:
        command.append("--embeddings")  # pooling: the model's own (mean, cls or last)
    elif c.task is Task.RERANK:
        command += ["--rerank", "--embeddings", "--pooling", "rank"]
    return tuple(command)


def server_environment(base: Mapping[str, str], gpu_uuid: str | None) -> dict[str, str]:
    """The server's environment: ``base`` without ``LLAMA_ARG_*``, seeing only its card (or
    its cards, comma-separated in slot order)."""
    env = {k: v for k, v in base.items() if not k.startswith("LLAMA_ARG_")}
    if gpu_uuid is None:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.pop("NVIDIA_VISIBLE_DEVICES", None)
    else:
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
        env["NVIDIA_VISIBLE_DEVICES"] = gpu_uuid
    return env


class LlamaServerRuntime(ServerProcessRuntime):
    """ModelRuntime on llama.cpp's ``llama-server`` binary."""

    server_name = "llama-server"
    ready_path = "/health"  # 503 while loading, 200 when ready
    bind_failure = "couldn't bind"
    key_variable = "LLAMA_API_KEY"

    def __init__(
        self,
        binary: Path,
        *,
        inventory_memory: Callable[[int], int | None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``binary``: the llama-server to run; the rest as ``ServerProcessRuntime``."""
        super().__init__(inventory_memory=inventory_memory, environ=environ)
        self._binary = binary

    def check(self, spec: ServerSpec) -> None:
        if not (self._binary.is_file() and os.access(self._binary, os.X_OK)):
            raise RuntimeFailure(f"{self._binary}: no llama-server executable there; {BUILD_HINT}")

    def command(self, spec: ServerSpec, port: int) -> tuple[str, ...]:
        return server_command(self._binary, spec, port)

    def environment(self, base: Mapping[str, str], spec: ServerSpec) -> dict[str, str]:
        return server_environment(base, spec.visible_cards)


@frozen(kw_only=True)
class LocalRelaunch:
    """How to start a recorded server again: the runtime that runs its program, and whether
    it ran on its card."""

    runtime: ServerProcessRuntime
    on_card: bool


def relaunch_for(
    command: Sequence[str], environ: Mapping[str, str] | None = None
) -> LocalRelaunch | None:
    """The runtime that started a server with ``command`` (llama-server, or llama-cpp-python's
    server run by the Python it names), starting from ``environ`` (default: this process's);
    None for a command line neither would have made."""
    args = tuple(command)
    if len(args) > 4 and args[1:4] == ("-I", "-m", "llama_cpp.server"):
        from nodeau.adapters.llama_cpp_python import LlamaCppPythonRuntime

        env = os.environ if environ is None else environ
        built = installed_builds(env, prefer_cuda=False)
        usable, library = _llama_cpp_library(env, built[0] if built else None)
        runtime: ServerProcessRuntime = LlamaCppPythonRuntime(
            Path(args[0]), library=library if usable else None, environ=environ
        )
        layers = server_search.value_of(args, "--n_gpu_layers")
    elif args and "--model" in args and "--alias" in args:
        runtime = LlamaServerRuntime(Path(args[0]), environ=environ)
        layers = server_search.value_of(args, "--n-gpu-layers")
    else:
        return None
    if layers is None:
        return None
    return LocalRelaunch(runtime=runtime, on_card=layers != "0")
