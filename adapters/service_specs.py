"""What a user service runs: the endpoint's, the dashboard's and the gateway's command
lines, and the rules a service's name and paths keep.

Why it is so: docs/adr/decisions/adapters.md (user_service.py), which installs them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from attrs import frozen

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")


class ServiceSpec(Protocol):
    """What a user service runs: its name, its command line, where its output goes, and a
    line that describes it (a systemd unit's ``Description=``)."""

    @property
    def service(self) -> str: ...

    @property
    def command(self) -> tuple[str, ...]: ...

    @property
    def log_path(self) -> Path: ...

    @property
    def description(self) -> str: ...


@frozen(kw_only=True)
class FleetSource:
    """Where a fleet workload's endpoint finds the cluster: a kubeconfig and its context
    (None: as kubectl finds them)."""

    kubeconfig: Path | None = None
    context: str | None = None


@frozen(kw_only=True)
class EndpointServiceSpec:
    """One workload's endpoint as a service: what runs, on which port, logging where.

    On one machine it finds its model server in the state at ``state_path``; for a
    workload on a fleet (``fleet``) it follows the workload's route through the cluster's
    API, and its service is named ``fleet.NAME`` so it never meets this machine's own
    workload of the same name."""

    workload: str
    port: int
    state_path: Path
    log_path: Path
    python: Path  # the interpreter that has nodeau installed (sys.executable)
    allowed_origins: tuple[str, ...] = ()  # web origins the endpoint also answers
    fleet: FleetSource | None = None

    @property
    def service(self) -> str:
        """The user service's name."""
        return self.workload if self.fleet is None else fleet_service(self.workload)

    @property
    def description(self) -> str:
        return f"Nodeau endpoint of workload {self.workload} on 127.0.0.1:{self.port}"

    def __attrs_post_init__(self) -> None:
        check_name(self.workload)
        if not 1 <= self.port <= 65535:
            raise ValueError(f"{self.port} is not a TCP port")
        kubeconfig = None if self.fleet is None else self.fleet.kubeconfig
        check_paths(
            ("state", self.state_path),
            ("log", self.log_path),
            ("python", self.python),
            *((("kubeconfig", kubeconfig),) if kubeconfig is not None else ()),
        )

    @property
    def command(self) -> tuple[str, ...]:
        return (
            str(self.python), "-m", "nodeau.apps.endpoint",
            "--workload", self.workload,
            "--port", str(self.port),
            *source_args(self.state_path, self.fleet),
            *(arg for origin in self.allowed_origins for arg in ("--allow-origin", origin)),
        )  # fmt: skip


DASHBOARD_SERVICE = "nodeau_dashboard"


@frozen(kw_only=True)
class DashboardServiceSpec:
    """The local dashboard as a user service: ``python -m nodeau.apps.dashboard --home HOME
    --port P`` (it reads the rest, and its token, from HOME's ``dashboard`` folder)."""

    port: int
    home: Path
    log_path: Path
    python: Path

    service = DASHBOARD_SERVICE

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"{self.port} is not a TCP port")
        check_paths(("home", self.home), ("log", self.log_path), ("python", self.python))

    @property
    def description(self) -> str:
        return f"Nodeau local dashboard on 127.0.0.1:{self.port}"

    @property
    def command(self) -> tuple[str, ...]:
        return (
            str(self.python), "-m", "nodeau.apps.dashboard",
            "--home", str(self.home),
            "--port", str(self.port),
        )  # fmt: skip


GATEWAY_SERVICE = "nodeau_gateway"


GATEWAY_PORT = 11435  # the gateway's default: beside Ollama's 11434, one address for all


@frozen(kw_only=True)
class GatewayServiceSpec:
    """The gateway as a user service: ``python -m nodeau.apps.endpoint.gateway --port P
    --state PATH [--allow-origin ORIGIN ...]``: every model of this machine on one port;
    with ``fleet``, every service of the fleet, their routes followed (``--fleet``)."""

    port: int
    state_path: Path
    log_path: Path
    python: Path
    allowed_origins: tuple[str, ...] = ()
    fleet: FleetSource | None = None

    service = GATEWAY_SERVICE

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"{self.port} is not a TCP port")
        check_paths(("state", self.state_path), ("log", self.log_path), ("python", self.python))

    @property
    def description(self) -> str:
        where = "here" if self.fleet is None else "on the fleet"
        return f"Nodeau gateway (every model served {where}) on 127.0.0.1:{self.port}"

    @property
    def command(self) -> tuple[str, ...]:
        return (
            str(self.python), "-m", "nodeau.apps.endpoint.gateway",
            "--port", str(self.port),
            *source_args(self.state_path, self.fleet),
            *(arg for origin in self.allowed_origins for arg in ("--allow-origin", origin)),
        )  # fmt: skip


def source_args(state_path: Path, fleet: FleetSource | None) -> tuple[str, ...]:
    """Where an endpoint or the gateway finds its model servers: this machine's state, or
    the fleet's cluster as its kubeconfig and context say."""
    if fleet is None:
        return ("--state", str(state_path))
    return (
        "--fleet",
        *(("--kubeconfig", str(fleet.kubeconfig)) if fleet.kubeconfig is not None else ()),
        *(("--context", fleet.context) if fleet.context else ()),
    )


def check_paths(*named: tuple[str, Path]) -> None:
    """ValueError for a path of a service's command that is relative or holds a control
    character (a unit file or plist could not say it)."""
    for what, path in named:
        if not path.is_absolute():
            raise ValueError(f"the {what} path must be absolute, not {path}")
        if any(ord(c) < 32 or ord(c) == 127 for c in str(path)):
            raise ValueError(f"the {what} path has a control character: {str(path)!r}")


def fleet_service(workload: str) -> str:
    """The user service name of a fleet workload's loopback endpoint."""
    return f"fleet.{workload}"


def check_name(name: str) -> str:
    """``name`` when it can name a service; ValueError otherwise."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"workload name {name!r} cannot name a user service: letters, digits, '.', '_' and "
            "'-' only, starting with a letter or digit"
        )
    return name
