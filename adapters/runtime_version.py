"""The name and version of the model server a workload runs, as the server itself says.

``llama-server --version`` prints ``version: 0.5.0-dev (build 1, commit 0c1e570)``; the
embedded server is llama-cpp-python's package at its installed version. Read once per
program: a qualification names the runtime in every run it records.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import subprocess

from nodeau.domain.records import RunningServer

VERSION_TIMEOUT_S = 10.0
_VERSION = re.compile(r"^version:\s*(.+)$", re.MULTILINE)


def runtime_name(server: RunningServer) -> str:
    """``llama-server <version>`` or ``llama-cpp-python <version>`` for this server."""
    command = server.command
    if "llama_cpp.server" in command:
        try:
            return f"llama-cpp-python {importlib.metadata.version('llama_cpp_python')}"
        except importlib.metadata.PackageNotFoundError:
            return "llama-cpp-python (version unknown: its package metadata is missing)"
    return _llama_server_version(command[0])


@functools.cache
def _llama_server_version(program: str) -> str:
    try:
        done = subprocess.run(
            [program, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"llama-server (version unknown: {exc})"
    found = _VERSION.search(done.stdout + done.stderr)
    return f"llama-server {found.group(1).strip()}" if found else "llama-server (version unknown)"
