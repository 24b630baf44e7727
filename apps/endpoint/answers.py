"""What the endpoint answers itself: the upstream it looks for, and its OpenAI-style errors.

Why it is so: docs/adr/decisions/apps-endpoint.md (answers.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from attrs import field, frozen
from starlette.responses import JSONResponse, Response

from nodeau.apps.endpoint.model_server import BadAnswer, NoFreeConnection, UpstreamError
from nodeau.domain.resolution import names_served
from nodeau.domain.tasks import Task, routes_for

CONNECT_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 60.0
POOL_TIMEOUT_S = 60.0
SHOWN_CHARS = 80


@frozen(kw_only=True)
class Upstream:
    """The model server behind the endpoint now: where it is, its task and model id."""

    base_url: str
    task: Task
    model_name: str
    started_at: datetime | None = None  # the model's "created" in /v1/models when known
    api_key: str | None = field(default=None, repr=False)  # what the model server asks for
    # what else a request's "model" may say: the model's names (alias, catalog name) and
    # its artifact id (or a prefix), as admitted; "" when not known
    names: tuple[str, ...] = ()
    artifact_id: str = ""

    def serves(self, asked: str) -> bool:
        """Whether a request's ``model`` names this model (``domain.resolution``)."""
        return names_served(asked, (self.model_name, *self.names), self.artifact_id)


@frozen(kw_only=True)
class Unavailable:
    """No model server to reach now, and when to come back: a restart is coming."""

    message: str
    retry_after_s: int
    model_server: str  # its state, for /health ("restarting")


def error(
    status: int,
    message: str,
    kind: str,
    headers: dict[str, str] | None = None,
    *,
    code: str | None = None,
    param: str | None = None,
) -> Response:
    """An OpenAI-style error: ``{"error": {"message": ..., "type": ..., "code": ...}}``; its
    code is the status unless OpenAI names one (``model_not_found``), with the ``param``
    at fault when there is one."""
    body: dict[str, object] = {"message": message, "type": kind, "code": code or status}
    if param is not None:
        body["param"] = param
    return JSONResponse({"error": body}, status_code=status, headers=headers)


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


def unavailable(down: Unavailable) -> Response:
    """The 503 of a model server that is restarting, with ``Retry-After``."""
    return error(
        503,
        f"{down.message}; this endpoint answers again once it serves"
        f" (retry after {down.retry_after_s} s)",
        "unavailable",
        headers={"Retry-After": str(down.retry_after_s)},
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


def model_not_found(asked: object, upstream: Upstream) -> Response:
    """The 404 of a request whose ``model`` names another model than the one served (or a
    400 when it is not text), as OpenAI answers a model it does not have."""
    if not isinstance(asked, str):
        return error(
            400,
            f"the request's model must be text naming {upstream.model_name!r}",
            "invalid_request_error",
            param="model",
        )
    return error(
        404,
        f"the model {_shown(asked)} is not served here: this endpoint serves "
        f"{upstream.model_name!r}{_also(upstream)}; send one of those names as model, "
        "or leave model out",
        "invalid_request_error",
        code="model_not_found",
        param="model",
    )


def _also(upstream: Upstream) -> str:
    parts = [repr(n) for n in upstream.names if n != upstream.model_name]
    if upstream.artifact_id:
        parts.append(f"its artifact id {upstream.artifact_id[:12]}… or a prefix of it")
    if not parts:
        return ""
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f" (it also answers to {listed})"


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


def host_refused(host: str, port: int | None) -> Response:
    """The 403 of a request whose ``Host`` does not name this endpoint."""
    return error(
        403,
        f"Host {_shown(host)} is not this endpoint: it answers to Host {_hosts(port)} only "
        "(a request through any other name is refused, against DNS rebinding)",
        "forbidden",
    )


def host_missing(port: int | None) -> Response:
    """The 400 of an HTTP/1.1 request without a ``Host``."""
    return error(
        400,
        f"the request has no Host header, which HTTP/1.1 requires; send Host: {_hosts(port)}",
        "invalid_request",
    )


def two_hosts() -> Response:
    """The 400 of a request with more than one ``Host``."""
    return error(400, "the request has more than one Host header", "invalid_request")


def origin_refused(origin: str) -> Response:
    """The 403 of a request from a web origin that is neither loopback nor allowed."""
    return error(
        403,
        f"requests from the web origin {_shown(origin)} are refused: this endpoint serves "
        "programs on this machine and pages from http://127.0.0.1, http://localhost or "
        "http://[::1] (any port); another origin is served only by an endpoint started with "
        "--allow-origin ORIGIN",
        "forbidden",
    )


def not_a_json_request(path: str, content_types: Sequence[str]) -> Response:
    """The 400 of a request to a JSON route whose ``Content-Type`` headers (their values)
    are not one ``application/json``."""
    if not content_types:
        given = "this request has none"
    elif len(content_types) > 1:
        given = f"this request has {len(content_types)}"
    else:
        given = f"this request's is {_shown(content_types[0])}"
    return error(
        400,
        f"POST {path} takes a JSON object sent with Content-Type: application/json; {given}",
        "invalid_request",
    )


def not_json(path: str, why: str) -> Response:
    """The 400 of a request to a JSON route whose body does not parse as JSON."""
    return error(
        400,
        f"the request body is not valid JSON ({why}); POST {path} takes a JSON object",
        "invalid_request",
    )


def not_an_object(path: str, kind: str) -> Response:
    """The 400 of a request to a JSON route whose body is JSON but not an object."""
    return error(
        400,
        f"the request body is JSON but not an object (it is {kind}); "
        f"POST {path} takes a JSON object",
        "invalid_request",
    )


def _shown(text: str) -> str:
    """What a client sent, quoted, shortened to ``SHOWN_CHARS``."""
    if len(text) > SHOWN_CHARS:
        return repr(text[:SHOWN_CHARS] + "...")
    return repr(text)


def _hosts(port: int | None) -> str:
    shown = "PORT" if port is None else str(port)
    return f"127.0.0.1:{shown}, localhost:{shown} or [::1]:{shown}"


def unreachable(base_url: str, exc: UpstreamError) -> Response:
    """The 502 of a model server not reached or not answering in HTTP (or the 503 of one
    with no connection free)."""
    if isinstance(exc, NoFreeConnection):
        return error(
            503,
            f"too many requests in flight to the model server at {base_url}; "
            f"none finished within {exc.waited_s:g} s",
            "unavailable",
        )
    if isinstance(exc, BadAnswer):
        what = f"no valid answer from the model server at {base_url}"
    else:
        what = f"cannot reach the model server at {base_url}"
    return error(502, f"{what}: {one_line(exc)}", "bad_gateway")


def model_object(upstream: Upstream) -> dict[str, object]:
    """The workload's model as an OpenAI model object."""
    created = int(upstream.started_at.timestamp()) if upstream.started_at is not None else 0
    return {
        "id": upstream.model_name,
        "object": "model",
        "created": created,
        "owned_by": "nodeau",
    }
