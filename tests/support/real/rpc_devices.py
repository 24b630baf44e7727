"""Several devices on one machine without a GPU: llama.cpp's rpc-servers on 127.0.0.1 (one
device each, from ``scripts/build-llama-rpc``) and the product's llama-server runtime given
them with ``--rpc``, so a split across cards runs for real; and each device's buffers as
the server's log reports them.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from nodeau.adapters.llama_server import LlamaServerRuntime
from nodeau.adapters.model_server_process import free_port
from nodeau.domain.memory import MIB
from nodeau.ports.runtime import ServerSpec
from tests.support.real.kubelet import ended

RPC_BUILD = "NODEAU_LLAMA_RPC"  # the bin folder scripts/build-llama-rpc printed
_DEVICE = re.compile(
    r"(?P<device>RPC\d*\[[^\]]+\]|CPU\S*)\s+(?P<kind>model|KV|compute|output) buffer size =\s*"
    r"(?P<mib>[\d.]+) MiB"
)


def rpc_build() -> Path:
    """The RPC build's bin folder; a failure under CI=true, a skip elsewhere, without one."""
    given = os.environ.get(RPC_BUILD, "")
    if given and (Path(given) / "ggml-rpc-server").is_file():
        return Path(given)
    message = f"no RPC build of llama.cpp (run scripts/build-llama-rpc, set {RPC_BUILD})"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def rpc_devices(build: Path, count: int) -> Iterator[tuple[int, ...]]:
    """``count`` rpc-servers listening on 127.0.0.1, their ports in order; ended after."""
    ports = tuple(free_port() for _ in range(count))
    with ExitStack() as stack:
        for port in ports:
            rpc = subprocess.Popen(
                [str(build / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            stack.callback(ended, rpc, 10.0)
        for port in ports:
            _listening(port)
        yield ports


def _listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"no rpc-server listened on 127.0.0.1:{port} within {timeout_s} s")


class RpcLlamaServerRuntime(LlamaServerRuntime):
    """The product's llama-server runtime, its command line given the rpc-servers' devices."""

    def __init__(self, binary: Path, ports: tuple[int, ...], **kwargs: Any) -> None:
        super().__init__(binary, **kwargs)
        self._rpc = ",".join(f"127.0.0.1:{p}" for p in ports)

    def command(self, spec: ServerSpec, port: int) -> tuple[str, ...]:
        return (*super().command(spec, port), "--rpc", self._rpc)


def device_buffers(log: str, ports: tuple[int, ...]) -> list[int]:
    """Each rpc-server's buffers (model, KV, compute, output) in bytes, in ``ports``' order,
    as a server started with ``log_buffers`` reported them at load."""
    by_device: dict[str, int] = {}
    for found in _DEVICE.finditer(log):
        if found["device"].startswith("RPC"):
            size = round(float(found["mib"]) * MIB)
            by_device[found["device"]] = by_device.get(found["device"], 0) + size
    port_of = {d: int(d.rsplit(":", 1)[1].rstrip("]")) for d in by_device}
    if sorted(port_of.values()) != sorted(ports):
        raise AssertionError(f"devices {sorted(by_device)} reported, ports {ports} expected")
    return [next(by_device[d] for d, p in port_of.items() if p == port) for port in ports]
