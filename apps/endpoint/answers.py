"""What the endpoint answers itself: the upstream it looks for, and its OpenAI-style errors.

Decisions:

* Every failure is an OpenAI-style JSON error (``{"error": {"message", "type", "code"}}``),
  its message one line naming what went wrong and, where it helps, what to do.
* An unreachable model server (502) is named by its address and why it could not be
  reached; a full pool of upstream connections is a 503 (too busy), not a 502.
"""

from __future__ import annotations

from datetime import datetime

import httpx
from attrs import frozen
from starlette.responses import JSONResponse, Response

from nodeau.domain.tasks import Task, routes_for

CONNECT_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 60.0
POOL_TIMEOUT_S = 60.0


@frozen(kw_only=True)
class Upstream:
    """The model server behind the endpoint now: where it is, its task and model id."""

    base_url: str
    task: Task
    model_name: str
    started_at: datetime | None = None  # the model's "created" in /v1/models when known


def error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Response:
    """An OpenAI-style error: ``{"error": {"message": ..., "type": ..., "code": ...}}``."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}},
        status_code=status,
        headers=headers,
    )


def one_line(exc: BaseException) -> str:
    """An exception as one line: its text, or its class name when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__


def not_running() -> Response:
    """The 503 of an endpoint whose model is not running."""
    return error(
        503,
        "the model of this endpoint is not running (stopped, or still starting); "
        "this endpoint answers again once it runs",
        "unavailable",
    )


def wrong_task(path: str, upstream: Upstream) -> Response:
    """The 404 of a route the workload's task does not answer."""
    routes = ", ".join(routes_for(upstream.task))
    return error(
        404,
        f"{path} is not served here: {upstream.model_name} runs the {upstream.task.value} task, "
        f"which answers {routes} (and /v1/models)",
        "not_found",
    )


def too_large(limit: int) -> Response:
    """The 413 of a request body over ``limit`` bytes; its connection is closed after."""
    return error(
        413,
        f"the request body is larger than this endpoint accepts ({limit // (1024 * 1024)} MiB)",
        "request_too_large",
        headers={"connection": "close"},
    )


def client_left() -> Response:
    """The 400 of a client that hung up before sending its whole body (nobody reads it)."""
    return error(400, "the client left before sending its whole body", "invalid_request")


def unreachable(base_url: str, exc: httpx.HTTPError) -> Response:
    """The 502 (or 503, when no connection came free) of a model server not reached."""
    if isinstance(exc, httpx.PoolTimeout):
        return error(
            503,
            f"too many requests in flight to the model server at {base_url}; "
            f"none finished within {POOL_TIMEOUT_S:g} s",
            "unavailable",
        )
    if isinstance(exc, httpx.ConnectError):
        why = "nothing answers there (it may be restarting)"
    elif isinstance(exc, httpx.ConnectTimeout):
        why = f"it did not accept a connection within {CONNECT_TIMEOUT_S:g} s"
    elif isinstance(exc, httpx.RemoteProtocolError):
        why = f"it closed the connection without a valid answer ({one_line(exc)})"
    else:
        why = f"{type(exc).__name__}: {one_line(exc)}"
    return error(502, f"cannot reach the model server at {base_url}: {why}", "bad_gateway")


def model_object(upstream: Upstream) -> dict[str, object]:
    """The workload's model as an OpenAI model object."""
    created = int(upstream.started_at.timestamp()) if upstream.started_at is not None else 0
    return {
        "id": upstream.model_name,
        "object": "model",
        "created": created,
        "owned_by": "nodeau",
    }
