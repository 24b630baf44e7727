"""Starting, or finding, the dashboard as a user service, and giving it a fresh token.

Why it is so: docs/adr/decisions/adapters.md (dashboard_service.py).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import httpx
from attrs import frozen

from nodeau.adapters.dashboard_token import TOKEN_FILE, new_token, write_owner_only
from nodeau.adapters.endpoint_services import ServiceHome, endpoint_manager
from nodeau.adapters.llama_server import free_port
from nodeau.adapters.service_specs import DASHBOARD_SERVICE, DashboardServiceSpec
from nodeau.adapters.user_service import ServiceError, UserService


class DashboardHome(ServiceHome, Protocol):
    """A home the dashboard runs for (the apps' ``Settings`` is one)."""

    @property
    def home(self) -> Path: ...


FOLDER = "dashboard"
SERVICE_FILE = "service.json"
LOG_FILE = "dashboard.log"
START_TIMEOUT_S = 30.0
CARRIED = ("KUBECONFIG", "HOME", "PATH", "USER", "LANG")
CARRIED_PREFIXES = ("NODEAU_", "XDG_")


@frozen(kw_only=True)
class Opened:
    """The dashboard's address, its fresh token, and how it runs."""

    url: str  # the address to open once: it carries the token
    address: str  # the dashboard's origin, without the token
    port: int
    token: str
    started: bool  # False: it was running already and was found
    service: str  # what runs it, for a person


def carried(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables the dashboard's server takes from the command that starts it."""
    return {
        k: v for k, v in sorted(environ.items()) if k in CARRIED or k.startswith(CARRIED_PREFIXES)
    }


def folder(home: Path) -> Path:
    return home / FOLDER


def read_service(home: Path) -> tuple[int, dict[str, str]] | None:
    """The port and environment the dashboard was last started with, if any."""
    try:
        saved = json.loads((folder(home) / SERVICE_FILE).read_text())
        port = int(saved["port"])
        environment = {str(k): str(v) for k, v in dict(saved["environment"]).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return port, environment


def answers(port: int, token: str, timeout_s: float = 2.0) -> bool:
    """Whether the dashboard on ``port`` answers with ``token`` (so it is ours and reads it)."""
    try:  # never through a proxy the environment names: this is loopback
        with httpx.Client(trust_env=False, timeout=timeout_s) as client:
            reply = client.get(
                f"http://127.0.0.1:{port}/api/session",
                headers={"Authorization": f"Bearer {token}"},
            )
    except httpx.HTTPError:
        return False
    return reply.status_code == 200


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def open_dashboard(settings: DashboardHome, manager: UserService | None = None) -> Opened:
    """Give the dashboard a fresh token, and start it unless it runs already."""
    home = settings.home.resolve()
    manager = manager if manager is not None else endpoint_manager(settings).manager
    token = new_token()
    write_owner_only(folder(home) / TOKEN_FILE, token.encode())
    environment = carried(settings.environ)
    saved = read_service(home)
    started = False
    if (
        saved is not None
        and saved[1] == environment
        and manager.running(DASHBOARD_SERVICE)
        and answers(saved[0], token)
    ):
        port = saved[0]
    else:
        manager.stop(DASHBOARD_SERVICE)
        port = saved[0] if saved is not None and port_free(saved[0]) else free_port()
        record = {"port": port, "environment": environment}
        write_owner_only(folder(home) / SERVICE_FILE, json.dumps(record, indent=2).encode())
        log = (settings.log_dir / LOG_FILE).resolve()
        log.parent.mkdir(parents=True, exist_ok=True)
        manager.install(
            DashboardServiceSpec(port=port, home=home, log_path=log, python=Path(sys.executable))
        )
        manager.start(DASHBOARD_SERVICE)
        wait_until_answering(port, token, log)
        started = True
    address = f"http://127.0.0.1:{port}"
    return Opened(
        url=f"{address}/?token={token}",
        address=address,
        port=port,
        token=token,
        started=started,
        service=manager.describe(),
    )


def wait_until_answering(port: int, token: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(port, token):
        if time.monotonic() >= deadline:
            raise ServiceError(
                f"the dashboard did not answer on 127.0.0.1:{port} within "
                f"{START_TIMEOUT_S:g} s (its log: {log})"
            )
        time.sleep(0.1)


def close_dashboard(settings: DashboardHome, manager: UserService | None = None) -> bool:
    """Stop the dashboard's service; whether it was running."""
    manager = manager if manager is not None else endpoint_manager(settings).manager
    running = manager.running(DASHBOARD_SERVICE)
    manager.stop(DASHBOARD_SERVICE)
    return running
