"""The llama-server the tests run: found as the product finds it, and a failure (never a
skip) when there is none, under CI=true and elsewhere alike."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from returns.result import Success

from nodeau.adapters.llama_cpp_python import LlamaCppPythonRuntime
from nodeau.adapters.llama_server import LIB_ENV, ModelServer, choose_runtime, find_llama_server

BUILD_HOW = (
    "no llama-server found: run `nodeau server install --cpu` (about 10 minutes on 2 cores), "
    "put llama-server on PATH, or set NODEAU_LLAMA_SERVER"
)


def llama_server_binary() -> Path:
    """The llama-server binary; fails the test when there is none."""
    found = find_llama_server(os.environ)
    if found is None or not found.is_file():
        chosen = f" ({found} is not a file)" if found else ""
        pytest.fail(f"{BUILD_HOW}{chosen}; CI={os.environ.get('CI', '')!r}")
    return found


INSTALL_HOW = (
    "llama-cpp-python's server is not usable here: run scripts/build-llama-server (it installs "
    "llama-cpp-python[server] into this Python, sharing the build of nodeau server install)"
)


def llama_cpp_python_runtime(
    inventory_memory: Callable[[int], int | None] | None = None,
) -> LlamaCppPythonRuntime:
    """The runtime ``choose_runtime`` picks with no llama-server configured, on PATH or
    installed, on the library of the llama-server build it shares (``LLAMA_CPP_LIB_PATH``,
    as scripts/build-llama-server installs it)."""
    built = find_llama_server(os.environ)
    env = {k: v for k, v in os.environ.items() if k != "NODEAU_LLAMA_SERVER"}
    env["PATH"] = str(Path(sys.executable).parent)
    env["NODEAU_LLAMA_CACHE"] = str(Path(sys.executable).parent / "no-installs-here")
    if built is not None:
        env.setdefault(LIB_ENV, str(built.parent))
    chosen = choose_runtime(env)
    if (
        not isinstance(chosen, Success)
        or chosen.unwrap().server is not ModelServer.LLAMA_CPP_PYTHON
    ):
        # under CI=true and elsewhere alike: a missing runtime is a failure, not a skip
        pytest.fail(f"{INSTALL_HOW} (chose {chosen}); CI={os.environ.get('CI', '')!r}")
    choice = chosen.unwrap()
    return LlamaCppPythonRuntime(
        choice.program, library=choice.library, inventory_memory=inventory_memory
    )
