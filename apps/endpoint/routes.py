"""A fleet workload's endpoint: the upstream is wherever the workload's route says now.

The route (``ports.cluster.WorkloadRoutes``) is followed on a thread of its own and kept
in memory, so a request costs no call to the cluster, and a move (a recovery) or a fence
(its machine unreachable) is seen as soon as the controller writes it. Decisions:

* A route with an address is the upstream; the model name is the workload's, as on one
  machine.
* A route without one is ``Unavailable`` at once (503 with ``Retry-After``), with the
  controller's own words for why (its Ready condition: the machine unreachable, held,
  recovering, restarting): a request never waits on a fenced instance.
* No such service (deleted, or not created yet) has no upstream.
* Until the first route arrives, requests are ``Unavailable`` ("looking it up").
"""

from __future__ import annotations

import threading

from nodeau.apps.endpoint.answers import Unavailable, Upstream
from nodeau.ports.cluster import Route, WorkloadRoutes

RETRY_AFTER_S = 5  # what a client is told while the workload has no address


class FollowedRoute:
    """The latest route of one workload, and the lookup the endpoint calls per request."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._route: Route | None = None
        self._seen = threading.Event()

    def changed(self, route: Route | None) -> None:
        """The route as the cluster says it now (called by the follower thread)."""
        self._route = route
        self._seen.set()

    def wait_first(self, timeout_s: float) -> bool:
        """Whether the first route arrived within ``timeout_s``."""
        return self._seen.wait(timeout_s)

    def __call__(self) -> Upstream | Unavailable | None:
        if not self._seen.is_set():
            return Unavailable(
                message=f"looking up {self.name} in the cluster",
                retry_after_s=1,
                model_server="unknown",
            )
        route = self._route
        if route is None:
            return None
        if route.base_url is None:
            why = route.why or f"{self.name} is {route.state or 'not decided yet'}"
            return Unavailable(
                message=f"{self.name} has no model server to route to now: {why}",
                retry_after_s=RETRY_AFTER_S,
                model_server=route.state or "unknown",
            )
        return Upstream(
            base_url=route.base_url,
            task=route.task,
            model_name=self.name,
            started_at=route.since,
            api_key=route.api_key,
            names=route.names,
            artifact_id=route.artifact_id,
        )


def follow_route(
    routes: WorkloadRoutes, name: str, stop: threading.Event, first_s: float = 10.0
) -> FollowedRoute:
    """Start following ``name``'s route on a daemon thread; waits up to ``first_s`` for the
    first one (the endpoint serves "looking it up" meanwhile)."""
    followed = FollowedRoute(name)
    thread = threading.Thread(
        target=routes.follow, args=(name, followed.changed, stop), name="route", daemon=True
    )
    thread.start()
    followed.wait_first(first_s)
    return followed
