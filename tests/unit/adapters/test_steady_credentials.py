"""The client's credentials refreshed at most once a second (adapters/kube/client.py
``steady_credentials``), although the client's own hook runs before every request and puts
a new hook of itself in place each time, as the kubernetes client's loaders do."""

from __future__ import annotations

import time
from typing import Any

from attrs import define

from nodeau.adapters.kube.client import steady_credentials


@define
class Configuration:
    refresh_api_key_hook: Any = None
    refreshed: int = 0

    def request(self) -> None:
        """What the client does before each request (``get_api_key_with_prefix``)."""
        if self.refresh_api_key_hook is not None:
            self.refresh_api_key_hook(self)


@define
class Client:
    configuration: Configuration


def loader_hook(config: Configuration) -> None:
    """As kube_config's ``_refresh_api_key``: set everything again, itself included."""
    config.refreshed += 1

    def again(c: Configuration) -> None:
        loader_hook(c)

    config.refresh_api_key_hook = again


def test_the_hook_runs_once_per_period_and_stays_steady_after_it_replaced_itself() -> None:
    config = Configuration(refresh_api_key_hook=loader_hook)
    api = steady_credentials(Client(configuration=config), every_s=0.2)
    for _ in range(50):
        config.request()
    assert config.refreshed == 1
    time.sleep(0.25)
    for _ in range(50):
        config.request()
    assert config.refreshed == 2
    assert api.configuration is config


def test_a_client_without_a_hook_is_left_as_it_is() -> None:
    config = Configuration()
    steady_credentials(Client(configuration=config))
    config.request()
    assert config.refresh_api_key_hook is None
