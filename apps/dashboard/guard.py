"""Every request to the dashboard passes here first, in this order:

Why it is so: docs/adr/decisions/apps-dashboard.md (guard.py).
"""

from __future__ import annotations

import re

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodeau.apps.dashboard.callers import DashboardCallers
from nodeau.apps.dashboard.session import (
    CSRF_HEADER,
    Token,
    cookie_name,
    csrf_value,
    matches,
    session_value,
)

POST_PATHS = re.compile(r"/api/batches/[^/]+/stop|/api/playground/[^/]+/(?:chat|embed|rerank)")
READ_METHODS = frozenset({"GET", "HEAD"})
HEALTH_PATH = "/health"
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
NEEDS_TOKEN = (
    "this dashboard needs its token: run `nodeau dashboard` and open the address it prints"
)


def refusal(status: int, message: str, kind: str, path: str, **headers: str) -> Response:
    """A refusal: JSON on the data and action routes, a line of text on the page."""
    if path.startswith("/api/"):
        body = {"error": {"message": message, "type": kind, "code": status}}
        return JSONResponse(body, status_code=status, headers=headers)
    return PlainTextResponse(message + "\n", status_code=status, headers=headers)


class Guard:
    """ASGI middleware: the rules above, then ``app``."""

    def __init__(self, app: ASGIApp, token: Token) -> None:
        self.app = app
        self.token = token
        self.callers = DashboardCallers()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = self.answer(scope)
        if answer is not None:
            await answer(scope, receive, _secured(send))
            return
        await self.app(scope, receive, _secured(send))

    def answer(self, scope: Scope) -> Response | None:
        """The answer these rules give a request themselves, or None to let it through."""
        refused = self.callers.refusal(scope)
        if refused is not None:
            return refused
        method, path = scope["method"], scope["path"]
        posts = POST_PATHS.fullmatch(path) is not None
        if method not in READ_METHODS and not (method == "POST" and posts):
            allow = "POST" if posts else "GET, HEAD"
            return refusal(
                405,
                f"{method} is not answered on {path}: the dashboard is read-only apart from "
                "stopping a batch job (POST /api/batches/NAME/stop) and the Playground's calls",
                "method_not_allowed",
                path,
                allow=allow,
            )
        if path == HEALTH_PATH:
            return None
        token = self.token.current()
        request = HTTPConnection(scope)
        port = scope["server"][1] if scope.get("server") else 0
        offered = request.query_params.get("token")
        if offered is not None:
            if method == "GET" and matches(token, offered):
                return _exchanged(path, port, token)
            return refusal(401, "that token is not this dashboard's: " + NEEDS_TOKEN,
                           "unauthorized", path)  # fmt: skip
        if not self.authorised(request, port, token):
            return refusal(401, NEEDS_TOKEN, "unauthorized", path)
        if method == "POST" and not matches(csrf_value(token), request.headers.get(CSRF_HEADER)):
            return refusal(
                403,
                "this action needs the page's CSRF token in the X-Nodeau-CSRF header "
                "(GET /api/session gives it)",
                "forbidden",
                path,
            )
        return None

    @staticmethod
    def authorised(request: HTTPConnection, port: int, token: str) -> bool:
        if not token:
            return False
        cookie = request.cookies.get(cookie_name(port))
        if cookie is not None and matches(session_value(token), cookie):
            return True
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and matches(token, bearer.strip())


def _exchanged(path: str, port: int, token: str) -> Response:
    """The redirect that drops the token from the address and sets the session cookie."""
    # one leading slash: "//host" would be another site's address
    response = RedirectResponse("/" + path.lstrip("/"), status_code=303)
    response.set_cookie(
        cookie_name(port), session_value(token), httponly=True, samesite="strict", path="/"
    )
    return response


def _secured(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name in [k for k in headers if k.lower().startswith("access-control-")]:
                del headers[name]
            for name, value in SECURITY_HEADERS.items():
                headers[name] = value
        await send(message)

    return sending
