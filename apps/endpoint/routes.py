"""A fleet workload's endpoint, and the fleet's gateway: the upstream is wherever each
workload's route says now.

Why it is so: docs/adr/decisions/apps-endpoint.md (routes.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from nodeau.apps.endpoint.answers import Unavailable, Upstream
from nodeau.apps.endpoint.choice import Served
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
        return None if self._route is None else upstream_of_route(self._route)


def upstream_of_route(route: Route) -> Upstream | Unavailable:
    """Where ``route`` says its workload answers now, or why nothing may be sent to it."""
    name = route.workload
    if route.base_url is None:
        why = route.why or f"{name} is {route.state or 'not decided yet'}"
        return Unavailable(
            message=f"{name} has no model server to route to now: {why}",
            retry_after_s=RETRY_AFTER_S,
            model_server=route.state or "unknown",
        )
    return Upstream(
        base_url=route.base_url,
        task=route.task,
        model_name=name,
        started_at=route.since,
        api_key=route.api_key,
        names=route.names,
        artifact_id=route.artifact_id,
    )


class FollowedRoutes:
    """The latest route of every service, and what the gateway may route to (``served``):
    each service whose endpoint is not stopped, by the same rules as its own endpoint."""

    def __init__(self) -> None:
        self._routes: Mapping[str, Route] = {}
        self._seen = threading.Event()

    def changed(self, routes: Mapping[str, Route]) -> None:
        """Every route as the cluster says it now (called by the follower thread)."""
        self._routes = routes
        self._seen.set()

    def wait_first(self, timeout_s: float) -> bool:
        return self._seen.wait(timeout_s)

    def __call__(self) -> Served:
        if not self._seen.is_set():
            raise LookupError("the fleet's services are still being looked up in the cluster")
        running: list[Upstream] = []
        waiting: dict[str, Unavailable] = {}
        for name, route in sorted(self._routes.items()):
            if route.endpoint_stopped:
                continue  # nodeau stop NAME: off its endpoint, and off the gateway too
            found = upstream_of_route(route)
            if isinstance(found, Unavailable):
                waiting[name] = found
            else:
                running.append(found)
        return Served(running=tuple(running), waiting=waiting)


def follow_routes(
    routes: WorkloadRoutes, stop: threading.Event, first_s: float = 10.0
) -> FollowedRoutes:
    """Start following every service's route on a daemon thread; waits up to ``first_s``
    for the first listing (the gateway answers 503 "looking them up" meanwhile)."""
    followed = FollowedRoutes()
    thread = threading.Thread(
        target=routes.follow_all, args=(followed.changed, stop), name="routes", daemon=True
    )
    thread.start()
    followed.wait_first(first_s)
    return followed


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
