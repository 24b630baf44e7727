"""``nodeau gateway [--port P] [--allow-origin ORIGIN] [--stop] [--json]``: one loopback
address for every model served on this machine, or on the fleet, routed by ``model``.

A user service like each endpoint; its port (11435 unless chosen) and origins are kept.
"""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import to_json
from nodeau.domain.origins import parse_origin
from nodeau.ports.errors import NodeauError


class GatewayError(NodeauError):
    """The gateway cannot run as asked (its port taken, a fleet plane, a bad origin)."""


def gateway(
    *,
    port: int | None = None,
    allow_origin: tuple[str, ...] | None = None,
    stop: Annotated[bool, Parameter(negative="")] = False,
    json: bool = False,
) -> int:
    """Start (or find) the gateway: every model served on this machine (on a fleet: every
    service of the fleet) at one address, http://127.0.0.1:11435/v1, a request going to
    the workload its model names.

    Parameters
    ----------
    port
        Its port on 127.0.0.1 (11435 unless chosen; kept for the next start).
    allow_origin
        A web origin (scheme://host[:port]) whose pages it also answers, beyond loopback
        pages, with CORS answers they can read; repeatable; kept for the next start.
    stop
        Stop the gateway instead; the workloads and their endpoints keep serving.
    json
        Print its address, port, origins and how it runs as JSON.
    """

    if port is not None and not 1 <= port <= 65535:
        raise GatewayError(f"--port {port} is not a TCP port (1-65535)")
    if stop:
        was = bootstrap.close_gateway()
        print("the gateway was stopped" if was else "the gateway was not running")
        return 0
    try:
        origins = None if allow_origin is None else tuple(parse_origin(o) for o in allow_origin)
    except ValueError as exc:
        raise GatewayError(f"--allow-origin: {exc}") from exc
    opened = bootstrap.open_gateway(
        port, origins, fleet=bootstrap.fleet_source(bootstrap.plane_choice())
    )
    if json:
        print(to_json(opened))
        return 0
    how = "started" if opened.started else "already running"
    print(f"gateway {how} at {opened.url} ({opened.service})")
    where = "on the fleet" if bootstrap.plane_choice().kubernetes else "here"
    print(
        f"every model served {where} answers there by its name (GET /v1/models lists them); "
        "nodeau gateway --stop stops it"
    )
    return 0
