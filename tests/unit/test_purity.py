"""The domain and the ports load no I/O library: checked in a fresh interpreter."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import nodeau.domain
import nodeau.ports

IO_LIBRARIES = (
    "kubernetes",
    "httpx",
    "pynvml",
    "starlette",
    "cryptography",
    "cyclopts",
    "cattrs",
    "sqlite3",
    "subprocess",
    "socket",
    "uvicorn",
    "gguf",
)


def all_modules(package: object) -> list[str]:
    path = package.__path__  # type: ignore[attr-defined]
    prefix = package.__name__ + "."  # type: ignore[attr-defined]
    return [m.name for m in pkgutil.walk_packages(path, prefix)]


def test_every_domain_and_port_module_imports_without_io_libraries() -> None:
    modules = all_modules(nodeau.domain) + all_modules(nodeau.ports)
    assert "nodeau.domain.admission" in modules  # the walk found the real modules
    program = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {IO_LIBRARIES!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_the_check_would_see_a_loaded_library() -> None:
    # the same probe notices an I/O library when one is imported, so an empty answer means something
    program = "import json, sys, socket\nprint(json.dumps('socket' in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) is True
