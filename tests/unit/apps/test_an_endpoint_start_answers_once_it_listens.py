"""Starting a workload's endpoint returns only once its port accepts connections.

The user service is a stand-in whose "endpoint" binds its port a moment after it was
started (as a real one does once Python has loaded it), or never; the port is a real
loopback socket, so what ``start`` waits for is what a client would meet.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeau.adapters.endpoint_services import EndpointServices
from nodeau.adapters.llama_server import free_port
from nodeau.adapters.service_specs import ServiceSpec
from nodeau.adapters.user_service import ServiceError
from nodeau.apps.settings import Settings, settings_from


class LateEndpoint:
    """A user service whose endpoint listens ``after_s`` after its start (None: never)."""

    def __init__(self, port: int, after_s: float | None) -> None:
        self.port = port
        self.after_s = after_s
        self.installed: list[ServiceSpec] = []
        self.sockets: list[socket.socket] = []
        self.timers: list[threading.Timer] = []

    def install(self, spec: ServiceSpec) -> None:
        self.installed.append(spec)

    def start(self, name: str) -> None:
        if self.after_s is not None:
            timer = threading.Timer(self.after_s, self._listen)
            self.timers.append(timer)
            timer.start()

    def _listen(self) -> None:
        s = socket.create_server(("127.0.0.1", self.port))
        self.sockets.append(s)

    def stop(self, name: str) -> None:
        pass

    def running(self, name: str) -> bool:
        return bool(self.sockets)

    def uninstall(self, name: str) -> None:
        pass

    def describe(self) -> str:
        return "a stand-in service"

    def close(self) -> None:
        for timer in self.timers:
            timer.cancel()
            if timer.is_alive():
                timer.join()
        for s in self.sockets:
            s.close()


@pytest.fixture
def port() -> int:
    return free_port()


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def settings(tmp_path: Path) -> Settings:
    return settings_from({"NODEAU_HOME": str(tmp_path / "home")})


@pytest.fixture
def late(port: int) -> Iterator[LateEndpoint]:
    service = LateEndpoint(port, after_s=0.5)
    yield service
    service.close()


@pytest.fixture
def never(port: int) -> Iterator[LateEndpoint]:
    service = LateEndpoint(port, after_s=None)
    yield service
    service.close()


def test_start_returns_once_the_endpoint_listens(
    tmp_path: Path, late: LateEndpoint, port: int
) -> None:
    assert not listening(port)
    how = EndpointServices(home=settings(tmp_path), manager=late).start("tiny", port)
    assert how == "a stand-in service"
    assert late.sockets, "start returned before the endpoint bound its port"
    assert listening(port)


def test_an_endpoint_that_never_listens_is_an_error_naming_its_log(
    tmp_path: Path, never: LateEndpoint, port: int
) -> None:
    e = EndpointServices(home=settings(tmp_path), manager=never, listen_timeout_s=0.3)
    with pytest.raises(ServiceError) as failed:
        e.start("tiny", port)
    said = failed.value.one_line()
    assert f"did not answer on 127.0.0.1:{port} within 0.3 s" in said
    assert str((tmp_path / "home" / "logs" / "tiny.endpoint.log").resolve()) in said
    assert "a stand-in service" in said
