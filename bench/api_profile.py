"""Where a benchmark's time goes on the test control plane: requests sent, and CPU by process.

``Profile(api, plane)`` counts the client's requests by method and resource, and the CPU seconds
of this process and of etcd, kube-apiserver and KWOK between ``start()`` and ``stop()``: printed
beside a bench's ratios, it says whether a faster pass sent fewer requests or spent less CPU.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import psutil

_RESOURCE = re.compile(r"/namespaces/[^/]+/([a-z]+)(?:/[^/?]+)?(/status)?")


def resource_of(method: str, url: str) -> str:
    """``PUT gpuservices/status`` for a URL of one object's status; ``GET pods`` for a list."""
    path = url.split("?", 1)[0]
    found = _RESOURCE.search(path)
    if found is None:
        return f"{method} {path.rsplit('/', 1)[-1]}"
    plural, sub = found.groups()
    return f"{method} {plural}{sub or ''}"


class Profile:
    """Requests sent through ``api`` and CPU seconds per process, between start and stop."""

    def __init__(self, api: Any, processes: Iterable[tuple[str, Any]]) -> None:
        self._api = api
        self._processes = {name: psutil.Process(p.pid) for name, p in processes}
        self.requests: Counter[str] = Counter()
        self.cpu: dict[str, float] = {}
        self.wall_s = 0.0
        self._cpu_at: dict[str, float] = {}
        self._started = 0.0
        self._original: Any = None

    def _cpu_now(self) -> dict[str, float]:
        own = time.process_time()
        found = {"this process": own}
        for name, process in self._processes.items():
            times = process.cpu_times()
            found[name] = times.user + times.system
        return found

    def start(self) -> None:
        rest = self._api.rest_client
        self._original = rest.request
        original, counts = self._original, self.requests

        def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            counts[resource_of(method, url)] += 1
            return original(method, url, *args, **kwargs)

        rest.request = counted
        self._cpu_at = self._cpu_now()
        self._started = time.perf_counter()

    def stop(self) -> None:
        self.wall_s = time.perf_counter() - self._started
        after = self._cpu_now()
        self.cpu = {name: after[name] - self._cpu_at[name] for name in after}
        self._api.rest_client.request = self._original

    def lines(self, objects: int) -> list[str]:
        """What was sent per object, and where the CPU went."""
        total = sum(self.requests.values())
        out = [f"requests: {total} in all, {total / objects:.2f} per object"]
        out += [
            f"  {what:<32} {n / objects:6.2f} per object"
            for what, n in sorted(self.requests.items(), key=lambda kv: -kv[1])
        ]
        busy = sum(self.cpu.values())
        out.append(
            f"CPU: {busy:.2f} s over {self.wall_s:.2f} s wall "
            f"({busy / self.wall_s:.2f} cores busy of {psutil.cpu_count()})"
        )
        out += [
            f"  {name:<16} {s:7.2f} s  {s / objects * 1e3:6.2f} ms per object"
            for name, s in sorted(self.cpu.items(), key=lambda kv: -kv[1])
        ]
        return out
