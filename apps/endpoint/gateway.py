"""``python -m nodeau.apps.endpoint.gateway --port P --state PATH | --fleet [...]``: one
loopback address for every model served on this machine (or fleet), each request routed by
its ``model`` to the workload serving it (``choice.EveryModel``), under the endpoint's rules.
``nodeau stop NAME`` takes a workload off its own endpoint and off the gateway at once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime

from nodeau.apps.endpoint.answers import Unavailable, Upstream
from nodeau.apps.endpoint.choice import Served
from nodeau.apps.endpoint.serve import LOOKUP_TTL_S, upstream_of
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.state import StateStore


def served_from_state(
    store: StateStore,
    clock: Callable[[], datetime],
    endpoint_listens: Callable[[int], bool],
) -> Callable[[], Served]:
    """Every service of the state whose endpoint listens: running, or restarting."""

    def served() -> Served:
        running: list[Upstream] = []
        waiting: dict[str, Unavailable] = {}
        for record in store.snapshot().workloads:
            port = record.endpoint_port
            if record.workload.kind is not WorkloadKind.SERVICE or not port:
                continue
            found = upstream_of(record, clock)
            if found is None or not endpoint_listens(port):
                continue
            if isinstance(found, Unavailable):
                waiting[record.workload.name] = found
            else:
                running.append(found)
        return Served(running=tuple(running), waiting=waiting)

    return served


class CachedServed:
    """``served()`` remembered for ``ttl_s`` seconds (not its exceptions)."""

    def __init__(self, served: Callable[[], Served], ttl_s: float = LOOKUP_TTL_S) -> None:
        self._served = served
        self._ttl_s = ttl_s
        self._value = Served()
        self._until = float("-inf")

    def __call__(self) -> Served:
        now = time.monotonic()
        if now >= self._until:
            self._value, self._until = self._served(), now + self._ttl_s
        return self._value


if __name__ == "__main__":  # the gateway's user service runs this module
    from nodeau.apps.endpoint.bootstrap import gateway_main

    sys.exit(gateway_main())
