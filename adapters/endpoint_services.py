"""Each workload's loopback endpoint, run as a user service (systemd --user, launchd, or a
supervised background process where neither exists, which it says).

Why it is so: docs/adr/decisions/adapters.md (endpoint_services.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from attrs import frozen

from nodeau.adapters.llama_server import free_port as any_free_port
from nodeau.adapters.loopback_port import listening
from nodeau.adapters.service_specs import EndpointServiceSpec, FleetSource, fleet_service
from nodeau.adapters.user_service import (
    UserService,
    choose_service_manager,
    wait_until_listening,
    write_atomically,
)


class ServiceHome(Protocol):
    """Where a home's services keep their records (``run_dir``) and logs, the state they
    serve from, and the environment they are started from (the apps' ``Settings`` is one)."""

    @property
    def run_dir(self) -> Path: ...

    @property
    def log_dir(self) -> Path: ...

    @property
    def state_path(self) -> Path: ...

    @property
    def environ(self) -> Mapping[str, str]: ...


LISTEN_TIMEOUT_S = 30.0  # a loopback endpoint answers within a second or two
ORIGINS = "endpoint-origins.json"  # in the run folder: each endpoint service's web origins


def kept_origins(home: ServiceHome, service: str) -> tuple[str, ...] | None:
    """The web origins the endpoint service ``service`` was last started with (None: none
    kept, as for one started before they were)."""
    try:
        found = json.loads((home.run_dir / ORIGINS).read_text())
    except (OSError, ValueError):
        return None
    origins = found.get(service) if isinstance(found, dict) else None
    if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
        return None
    return tuple(origins)


def keep_origins(home: ServiceHome, service: str, origins: tuple[str, ...]) -> None:
    path = home.run_dir / ORIGINS
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        found = {}
    kept = found if isinstance(found, dict) else {}
    kept[service] = list(origins)
    write_atomically(path, json.dumps(kept, sort_keys=True).encode())


def install_endpoint(
    manager: UserService,
    home: ServiceHome,
    name: str,
    port: int,
    allowed_origins: tuple[str, ...],
    fleet: FleetSource | None = None,
) -> Path:
    """Install ``name``'s endpoint service (``fleet``: one that routes to that fleet's
    workload); the log it writes."""
    prefix = "" if fleet is None else "fleet."
    log = (home.log_dir / f"{prefix}{name}.endpoint.log").resolve()
    manager.install(
        EndpointServiceSpec(
            workload=name,
            port=port,
            state_path=home.state_path.resolve(),
            log_path=log,
            python=Path(sys.executable),
            allowed_origins=allowed_origins,
            fleet=fleet,
        )
    )
    return log


@frozen(kw_only=True)
class EndpointServices:
    """This home's workloads' loopback endpoints, each a user service."""

    home: ServiceHome
    manager: UserService
    listen_timeout_s: float = LISTEN_TIMEOUT_S

    def free_port(self) -> int:
        return any_free_port()

    def start(self, name: str, port: int, allowed_origins: tuple[str, ...] = ()) -> str:
        """Install and start the endpoint of ``name`` on 127.0.0.1:``port`` (also answering
        pages from ``allowed_origins``) and wait until it listens; say how it runs."""
        log = install_endpoint(self.manager, self.home, name, port, allowed_origins)
        keep_origins(self.home, name, allowed_origins)
        self.manager.start(name)
        how = self.manager.describe()
        wait_until_listening(port, self.listen_timeout_s, log, how)
        return how

    def allowed_origins(self, name: str) -> tuple[str, ...] | None:
        """The web origins ``name``'s endpoint was last started with (None: none kept)."""
        return kept_origins(self.home, name)

    def stop(self, name: str) -> None:
        self.manager.stop(name)


FLEET_PORTS = "fleet-endpoints.json"  # in the run folder: each fleet workload's loopback port


@frozen(kw_only=True)
class FleetEndpointServices:
    """The loopback endpoints of workloads on a fleet, run on this machine as user services
    (``fleet.NAME``), each following its workload's route through the cluster's API. A
    workload keeps its port here across stops and starts, as on one machine."""

    home: ServiceHome
    manager: UserService
    source: FleetSource

    def _ports_path(self) -> Path:
        return self.home.run_dir / FLEET_PORTS

    def _ports(self) -> dict[str, int]:
        try:
            found = json.loads(self._ports_path().read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): int(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def port(self, name: str) -> int | None:
        """The loopback port this machine gave ``name``, if any."""
        return self._ports().get(name)

    def start(self, name: str, allowed_origins: tuple[str, ...] = ()) -> tuple[int, str]:
        """Install and start ``name``'s loopback endpoint (its port kept, else a free one);
        the port, and how it runs."""
        ports = self._ports()
        port = ports.get(name) or any_free_port()
        ports[name] = port
        write_atomically(self._ports_path(), json.dumps(ports, sort_keys=True).encode())
        log = install_endpoint(self.manager, self.home, name, port, allowed_origins, self.source)
        keep_origins(self.home, fleet_service(name), allowed_origins)
        self.manager.start(fleet_service(name))
        how = self.manager.describe()
        wait_until_listening(port, LISTEN_TIMEOUT_S, log, how)
        return port, how

    def running_origins(self, name: str) -> tuple[str, ...] | None:
        """The web origins ``name``'s loopback endpoint answers while it listens (() when
        none were kept); None when it does not listen here."""
        port = self.port(name)
        if port is None or not listening(port):
            return None
        return kept_origins(self.home, fleet_service(name)) or ()

    def origins(self, name: str) -> tuple[str, ...]:
        """The web origins ``name``'s loopback endpoint was last started with (() if none)."""
        return kept_origins(self.home, fleet_service(name)) or ()

    def stop(self, name: str, *, forget: bool = False) -> None:
        """Stop ``name``'s loopback endpoint; ``forget``: uninstall it and free its port."""
        if self.port(name) is None:
            return
        if not forget:
            self.manager.stop(fleet_service(name))
            return
        self.manager.uninstall(fleet_service(name))
        ports = self._ports()
        ports.pop(name, None)
        write_atomically(self._ports_path(), json.dumps(ports, sort_keys=True).encode())


def fleet_endpoint_manager(home: ServiceHome, source: FleetSource) -> FleetEndpointServices:
    local = endpoint_manager(home)
    return FleetEndpointServices(home=home, manager=local.manager, source=source)


def endpoint_manager(home: ServiceHome) -> EndpointServices:
    run_dir = home.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    home.log_dir.mkdir(parents=True, exist_ok=True)
    return EndpointServices(
        home=home, manager=choose_service_manager(home.environ, sys.platform, run_dir)
    )


GATEWAY = "gateway.json"  # in the run folder: the gateway's port and web origins


@frozen(kw_only=True)
class Gateway:
    """The gateway as it runs: its address, and how."""

    url: str  # its OpenAI base URL
    port: int
    allowed_origins: tuple[str, ...]
    started: bool  # False: it was running already, as asked
    service: str  # what runs it, for a person


def kept_gateway(home: ServiceHome) -> tuple[int, tuple[str, ...]] | None:
    """The port and web origins the gateway was last started with, if any."""
    found = _kept_gateway(home)
    return None if found is None else (found[0], found[1])


def _kept_gateway(home: ServiceHome) -> tuple[int, tuple[str, ...], object] | None:
    """The port, web origins and model servers' source (this machine: None; a fleet: its
    kubeconfig and context) the gateway was last started with."""
    try:
        found = json.loads((home.run_dir / GATEWAY).read_text())
        port = int(found["port"])
        origins = tuple(str(o) for o in found["allowed_origins"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return port, origins, found.get("fleet")


def open_gateway(
    home: ServiceHome,
    port: int | None = None,
    allowed_origins: tuple[str, ...] | None = None,
    endpoints: EndpointServices | None = None,
    fleet: FleetSource | None = None,
) -> Gateway:
    """Start the gateway on ``port`` (else the one it had, else ``DEFAULT_PORT``), or find
    it running so; ServiceError when that port is another program's. ``fleet``: it routes
    to every service of that fleet instead of this machine's workloads."""
    from nodeau.adapters.service_specs import GATEWAY_PORT, GATEWAY_SERVICE, GatewayServiceSpec
    from nodeau.adapters.user_service import ServiceError

    local = endpoints if endpoints is not None else endpoint_manager(home)
    manager = local.manager
    kept = _kept_gateway(home)
    chosen = port or (kept[0] if kept is not None else GATEWAY_PORT)
    origins = allowed_origins if allowed_origins is not None else kept[1] if kept else ()
    url = f"http://127.0.0.1:{chosen}/v1"
    source = None if fleet is None else fleet_record(fleet)
    as_asked = kept == (chosen, origins, source)
    if as_asked and manager.running(GATEWAY_SERVICE) and listening(chosen):
        return Gateway(
            url=url, port=chosen, allowed_origins=origins, started=False, service=manager.describe()
        )
    manager.stop(GATEWAY_SERVICE)
    if listening(chosen):
        raise ServiceError(
            f"port {chosen} on 127.0.0.1 is taken by another program; "
            "choose another with nodeau gateway --port PORT"
        )
    log = (home.log_dir / "gateway.log").resolve()
    manager.install(
        GatewayServiceSpec(
            port=chosen,
            state_path=home.state_path.resolve(),
            log_path=log,
            python=Path(sys.executable),
            allowed_origins=origins,
            fleet=fleet,
        )
    )
    record = {"port": chosen, "allowed_origins": list(origins), "fleet": source}
    write_atomically(home.run_dir / GATEWAY, json.dumps(record).encode())
    manager.start(GATEWAY_SERVICE)
    how = manager.describe()
    wait_until_listening(chosen, local.listen_timeout_s, log, how)
    return Gateway(url=url, port=chosen, allowed_origins=origins, started=True, service=how)


def fleet_record(fleet: FleetSource) -> dict[str, str | None]:
    """How the gateway's record keeps the fleet it routes to."""
    kubeconfig = None if fleet.kubeconfig is None else str(fleet.kubeconfig)
    return {"kubeconfig": kubeconfig, "context": fleet.context}


def close_gateway(home: ServiceHome) -> bool:
    """Stop the gateway; whether it was running. The workloads are not touched."""
    from nodeau.adapters.service_specs import GATEWAY_SERVICE

    manager = endpoint_manager(home).manager
    running = manager.running(GATEWAY_SERVICE)
    manager.stop(GATEWAY_SERVICE)
    return running
