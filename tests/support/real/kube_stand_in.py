"""A model-server Pod's part played by a real process: KWOK runs no container, so a test
starts a real llama-server with the Pod's own arguments on a loopback address and writes
that address into the Pod's status, as a kubelet and its network would."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from nodeau.adapters.kube import resources as r

READY_S = 60.0


def serve_pod(binary: Path, pod: Any, address: str, log: Path) -> subprocess.Popen[bytes]:
    """A llama-server with ``pod``'s arguments listening on ``address`` (its ``--host``
    replaced), once it answers ``/health`` (or has exited, or READY_S passed)."""
    args = list(pod.spec.containers[0].args)
    args[args.index("--host") + 1] = address
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary), *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    base = f"http://{address}:{r.SERVER_PORT}"
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return process


def point_pod_at(core: client.CoreV1Api, pod: Any, address: str) -> None:
    """The Pod's status says it has ``address`` (both fields: a strategic merge is refused)."""
    core.patch_namespaced_pod_status(
        pod.metadata.name, r.NAMESPACE,
        [{"op": "replace", "path": "/status/podIP", "value": address},
         {"op": "replace", "path": "/status/podIPs", "value": [{"ip": address}]}],
    )  # fmt: skip
