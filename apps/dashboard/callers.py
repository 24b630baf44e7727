"""Who the dashboard answers: the endpoint's Host rule as it is, and a stricter Origin rule.

Why it is so: docs/adr/decisions/apps-dashboard.md (callers.py).
"""

from __future__ import annotations

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from nodeau.apps.endpoint.callers import LOOPBACK_NAMES, CallerRules


def own_origins(port: int) -> frozenset[bytes]:
    """The ``Origin`` values (in lower case) of the dashboard's page on ``port``."""
    return frozenset(f"http://{name}:{port}".encode() for name in LOOPBACK_NAMES)


def _without_origin(scope: Scope) -> Scope:
    return {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"origin"]}


class DashboardCallers:
    """The dashboard's caller rules: ``refusal(scope)`` is the answer to a request they
    refuse (the Host rule first), else None."""

    def __init__(self) -> None:
        # the endpoint's rules judge the Host (asked for a refusal only, never as an app);
        # the Origin rule is this class's own
        self._host_rules = CallerRules(_nothing)

    def refusal(self, scope: Scope) -> Response | None:
        refused = self._host_rules.refusal(_without_origin(scope))
        if refused is not None:
            return refused
        server = scope.get("server")
        port = server[1] if server is not None else 0
        allowed = own_origins(port)
        for name, value in scope["headers"]:
            if name == b"origin" and value.lower() not in allowed:
                return origin_refused(value.decode("latin-1"), port)
        return None


def origin_refused(origin: str, port: int) -> Response:
    shown = origin if len(origin) <= 100 else origin[:100] + "..."
    return JSONResponse(
        {
            "error": {
                "message": f"requests from the web origin {shown!r} are refused: the dashboard "
                f"answers its own page (http://127.0.0.1:{port}) and programs on this machine",
                "type": "forbidden",
                "code": 403,
            }
        },
        status_code=403,
    )


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("the Host rules are asked for a refusal only")
