"""Running the dashboard: uvicorn on 127.0.0.1 only, with the endpoint's protocol, so its
requests meet the same bounds (head size, head and body time, connections) and its log the
same bound on rate (``nodeau.apps.endpoint.limits``, ``log_bound``; docs/adr/0020).
Its access log is off: a request line could carry the token.
"""

from __future__ import annotations

import uvicorn

from nodeau.apps.endpoint.limits import Limits
from nodeau.apps.endpoint.log_bound import Server, log_config
from nodeau.apps.endpoint.request_head import within
from nodeau.apps.endpoint.serve import fit_descriptors

HOST = "127.0.0.1"  # loopback only: not a setting (concepts: "that is not a setting")
LIMITS = Limits(max_connections=128)  # one person's page and Playground
HTTP_CLIENT_IN_FLIGHT, HTTP_CLIENT_IDLE = 100, 20  # the Playground client's pool, to the endpoints


def dashboard_config(
    app: object, port: int, *, log_level: str = "info", limits: Limits = LIMITS
) -> uvicorn.Config:
    """uvicorn's configuration for the dashboard on ``127.0.0.1:port`` (host fixed)."""
    return uvicorn.Config(
        app,  # type: ignore[arg-type]  # any ASGI app
        host=HOST,
        port=port,
        http=within(limits),
        loop="uvloop",
        ws="none",
        proxy_headers=False,
        lifespan="on",
        access_log=False,
        server_header=False,
        log_level=log_level,
        log_config=log_config(),
        timeout_keep_alive=limits.keep_alive_s,
    )


def serve(app: object, port: int, *, log_level: str = "info", limits: Limits = LIMITS) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` until SIGINT/SIGTERM, the cap on connections
    lowered if this process's descriptors cannot hold it."""
    config = dashboard_config(app, port, log_level=log_level, limits=limits)
    config.http = within(fit_descriptors(limits, HTTP_CLIENT_IN_FLIGHT, HTTP_CLIENT_IDLE))
    Server(config).run()
