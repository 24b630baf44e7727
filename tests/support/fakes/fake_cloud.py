"""A local stand-in for Nodeau Cloud: starlette on 127.0.0.1, recording every byte it receives.

It speaks docs/cloud.md's API; ``received`` keeps every byte off the socket (headers and all).
``mode`` makes an outage (``"error"``: 500s; ``"slow"``: past the client's timeout); a cloud
that is down is ``nowhere``, a URL where nothing listens.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from tests.support.real.upstream import free_port, loopback_socket, serving

ACCOUNT = "Test Organisation"


class FakeCloud:
    """The fake's state: what it received, what it hands out, how it behaves now."""

    def __init__(
        self,
        entitlement: Callable[[str], bytes | None] = lambda _installation: None,
        *,
        pending_polls: int = 0,
        decline: bool = False,
        register_as: str | None = None,
    ) -> None:
        self.entitlement = entitlement
        self.pending_polls = pending_polls
        self.decline = decline
        self.register_as = register_as  # another installation id to claim, to test the check
        self.mode = "ok"
        self.slow_s = 3.0
        self.closing = False
        self._lock = threading.Lock()
        self._received = bytearray()
        self.bodies: list[tuple[str, int]] = []  # (path, body bytes) of every request
        self.sign_ins: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []
        self.outcomes: list[dict[str, Any]] = []
        self.disconnects: list[str] = []
        self.operations: list[dict[str, str]] = []  # handed out until their outcome arrives
        self.tokens: dict[str, str] = {}  # credential -> installation
        self._codes: dict[str, dict[str, Any]] = {}

    # -- what it saw -------------------------------------------------------------------

    def record(self, data: bytes) -> None:
        with self._lock:
            self._received += data

    @property
    def received(self) -> bytes:
        with self._lock:
            return bytes(self._received)

    def report_count(self) -> int:
        with self._lock:
            return len(self.reports)

    # -- the API -----------------------------------------------------------------------

    def app(self) -> Starlette:
        async def guard(request: Request) -> tuple[bytes, Response | None]:
            body = await request.body()
            with self._lock:
                self.bodies.append((request.url.path, len(body)))
            if self.mode == "error":
                return body, JSONResponse({"error": "server_error"}, status_code=500)
            if self.mode == "slow":  # past the client's timeout, or until the fake closes
                for _ in range(int(self.slow_s / 0.02)):
                    if self.closing:
                        break
                    await anyio.sleep(0.02)
            return body, None

        def installation_of(request: Request) -> str | None:
            token = request.headers.get("authorization", "").removeprefix("Bearer ")
            found = self.tokens.get(token)
            return found if found == request.path_params["installation"] else None

        async def device_code(request: Request) -> Response:
            body, refused = await guard(request)
            if refused is not None:
                return refused
            asked = json.loads(body)
            code = secrets.token_hex(16)
            with self._lock:
                self.sign_ins.append(asked)
                self._codes[code] = {"installation": asked["installation"], "polls": 0}
            base = f"{request.url.scheme}://{request.url.netloc}"
            return JSONResponse(
                {
                    "device_code": code,
                    "user_code": "WDJB-MJHT",
                    "verification_uri": f"{base}/device",
                    "verification_uri_complete": f"{base}/device?user_code=WDJB-MJHT",
                    "expires_in": 600,
                    "interval": 0,
                }
            )

        async def device_token(request: Request) -> Response:
            body, refused = await guard(request)
            if refused is not None:
                return refused
            code = self._codes.get(json.loads(body)["device_code"])
            if code is None:
                return JSONResponse({"error": "expired_token"}, status_code=400)
            if self.decline:
                return JSONResponse({"error": "access_denied"}, status_code=400)
            code["polls"] += 1
            if code["polls"] <= self.pending_polls:
                return JSONResponse({"error": "authorization_pending"}, status_code=400)
            installation = self.register_as or code["installation"]
            token = secrets.token_hex(24)
            self.tokens[token] = installation
            document = self.entitlement(installation)
            return JSONResponse(
                {
                    "access_token": token,
                    "token_type": "Bearer",
                    "account": {"id": "acct-1", "name": ACCOUNT},
                    "installation": installation,
                    "entitlement": None if document is None else document.decode(),
                }
            )

        async def reports(request: Request) -> Response:
            body, refused = await guard(request)
            if refused is not None:
                return refused
            if installation_of(request) is None:
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            with self._lock:
                self.reports.append(json.loads(body))
            return Response(status_code=204)

        async def operations(request: Request) -> Response:
            _, refused = await guard(request)
            if refused is not None:
                return refused
            if installation_of(request) is None:
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            with self._lock:
                waiting = list(self.operations)
            return JSONResponse({"operations": waiting})

        async def outcome(request: Request) -> Response:
            body, refused = await guard(request)
            if refused is not None:
                return refused
            if installation_of(request) is None:
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            said = {"id": request.path_params["operation"], **json.loads(body)}
            with self._lock:
                self.outcomes.append(said)
                self.operations = [o for o in self.operations if o["id"] != said["id"]]
            return Response(status_code=204)

        async def disconnect(request: Request) -> Response:
            _, refused = await guard(request)
            if refused is not None:
                return refused
            installation = installation_of(request)
            if installation is None:
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            with self._lock:
                self.disconnects.append(installation)
            return Response(status_code=204)

        prefix = "/v1/installations/{installation}"
        return Starlette(
            routes=[
                Route("/v1/device/code", device_code, methods=["POST"]),
                Route("/v1/device/token", device_token, methods=["POST"]),
                Route(f"{prefix}/reports", reports, methods=["POST"]),
                Route(f"{prefix}/operations", operations, methods=["GET"]),
                Route(f"{prefix}/operations/{{operation}}", outcome, methods=["POST"]),
                Route(f"{prefix}/disconnect", disconnect, methods=["POST"]),
            ]
        )


def recording_protocol(sink: Callable[[bytes], None]) -> type[H11Protocol]:
    """uvicorn's h11 protocol, handing every chunk read off the socket to ``sink`` first."""

    class Recording(H11Protocol):
        def data_received(self, data: bytes) -> None:
            sink(bytes(data))
            super().data_received(data)

    return Recording


@contextmanager
def running_fake_cloud(fake: FakeCloud) -> Iterator[str]:
    """Serve ``fake`` on a free 127.0.0.1 port until the block ends; yields its base URL."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        fake.app(),
        lifespan="off",
        log_level="warning",
        http=recording_protocol(fake.record),
        loop="asyncio",
        timeout_graceful_shutdown=1,
    )
    with serving(uvicorn.Server(config), sock):
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            fake.closing = True


def nowhere() -> str:
    """A loopback URL where nothing listens: a cloud that is down."""
    return f"http://127.0.0.1:{free_port()}"
