"""Each workload's loopback endpoint, run as a user service (systemd --user, launchd, or a
supervised background process where neither exists, which it says)."""

from __future__ import annotations

import sys
from pathlib import Path

from attrs import frozen

from nodeau.adapters.llama_server import free_port as any_free_port
from nodeau.adapters.user_service import (
    EndpointServiceSpec,
    UserService,
    choose_service_manager,
)
from nodeau.apps.settings import Settings


@frozen(kw_only=True)
class Endpoints:
    settings: Settings
    manager: UserService

    def free_port(self) -> int:
        return any_free_port()

    def start(self, name: str, port: int, allowed_origins: tuple[str, ...] = ()) -> str:
        """Install and start the endpoint of ``name`` on 127.0.0.1:``port`` (also answering
        pages from ``allowed_origins``); say how it runs."""
        self.manager.install(
            EndpointServiceSpec(
                workload=name,
                port=port,
                state_path=self.settings.state_path.resolve(),
                log_path=(self.settings.log_dir / f"{name}.endpoint.log").resolve(),
                python=Path(sys.executable),
                allowed_origins=allowed_origins,
            )
        )
        self.manager.start(name)
        return self.manager.describe()

    def stop(self, name: str) -> None:
        self.manager.stop(name)


def endpoint_manager(settings: Settings) -> Endpoints:
    run_dir = settings.home / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    return Endpoints(
        settings=settings, manager=choose_service_manager(settings.environ, sys.platform, run_dir)
    )
