"""Nodeau Cloud's composition root: its adapters built from the settings.

The CLI builds the plane (``nodeau.apps.cli.bootstrap``) and these parts, and passes both
to the use cases (``signin``, ``reporter``); tests pass their own plane the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from importlib.metadata import version as installed
from pathlib import Path

from nodeau.adapters.cloud_client import HttpxNodeauCloud
from nodeau.adapters.cloud_file import FileCloudState
from nodeau.adapters.reporter_process import DetachedReporter
from nodeau.ports.cloud import NodeauCloud, Reporter


def cloud_state(home: Path) -> FileCloudState:
    """What this machine keeps of the cloud, under ``home``."""
    return FileCloudState(home)


def nodeau_cloud(
    base_url: str, timeout_s: float, state: FileCloudState, clock: Callable[[], datetime]
) -> HttpxNodeauCloud:
    """The cloud's API at ``base_url``; every call recorded in ``state``."""
    return HttpxNodeauCloud(base_url, timeout_s=timeout_s, record=state.record_call, clock=clock)


class CloudClients:
    """One client of the cloud's API per address it is reached at, every call recorded in
    ``state``; ``close`` closes them all."""

    def __init__(
        self, timeout_s: float, state: FileCloudState, clock: Callable[[], datetime]
    ) -> None:
        self._timeout_s = timeout_s
        self._state = state
        self._clock = clock
        self._clients: dict[str, HttpxNodeauCloud] = {}

    def at(self, base_url: str) -> NodeauCloud:
        if base_url not in self._clients:
            self._clients[base_url] = nodeau_cloud(
                base_url, self._timeout_s, self._state, self._clock
            )
        return self._clients[base_url]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


def reporter() -> Reporter:
    """The fleet's reporter, run detached."""
    return DetachedReporter()


def version() -> str:
    return installed("nodeau")
