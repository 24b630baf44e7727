"""A fleet on a real API server for the recovery tests, its controller run pass by pass.

``Fleet`` keeps each machine's report, renews those of the machines that answer and runs
one controller pass a step, on the real clock; ``SHAS`` names the models' artifacts by
letter; ``record`` reads a workload's record from its object's status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import evolve

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.report_form import MachineArtifact, MachineReport
from nodeau.adapters.kube.reports import publish_report
from nodeau.adapters.record_json import from_plain
from nodeau.apps.controller.loop import Controller
from nodeau.ports.state import WorkloadRecord
from tests.support.real.kube_controller import controller, report, status

SHAS = {"x": "a1", "y": "b2", "z": "c3", "w": "d4", "f": "e5", "g": "f6"}


class Fleet:
    """The machines' reports, renewed for those that answer, and the controller's passes."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.reports: dict[str, MachineReport] = {}
        self.quiet: set[str] = set()
        self.ctl: Controller = controller(api)

    def machine(self, name: str, cards: int, *artifacts: MachineArtifact) -> None:
        self.reports[name] = report(name, cards, *artifacts)
        publish_report(self.api, self.reports[name])

    def renew(self) -> None:
        now = datetime.now(UTC)
        for name, rep in self.reports.items():
            if name not in self.quiet and now - rep.at > timedelta(seconds=5):
                self.reports[name] = evolve(rep, at=now)
                publish_report(self.api, self.reports[name])

    def step(self) -> None:
        self.renew()
        self.ctl.resync()

    def until(self, predicate: Callable[[], bool], what: str, timeout_s: float = 150) -> None:
        """Passes (about one a second) until ``predicate`` holds after one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.step()
            if predicate():
                return
            time.sleep(0.5)
        raise AssertionError(f"not within {timeout_s} s: {what}")

    def passes(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.step()
            time.sleep(0.5)


def record(api: Any, name: str, plural: str = r.GPUSERVICES) -> WorkloadRecord:
    return from_plain(status(api, name, plural)["record"], WorkloadRecord, name)
