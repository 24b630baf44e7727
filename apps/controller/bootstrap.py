"""The controller's composition root: the Kubernetes adapters behind its ports.

The one place under apps/controller that names an adapter; everything else
takes the ports it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from nodeau.adapters.kube.copies import KubeModelCopies
from nodeau.adapters.kube.events import KubeEventLog
from nodeau.adapters.kube.health_store import KubeHealthRecords
from nodeau.adapters.kube.marks import KubeFleetMarks
from nodeau.adapters.kube.pods import KubeServerPods
from nodeau.adapters.kube.reports import KubeMachineReports
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.watch import KubeWorkloadWatch
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.apps.controller.loop import Controller, ControllerPorts


def kube_ports(api: Any, *, clock: Callable[[], datetime], identity: str) -> ControllerPorts:
    """The controller's ports on one configured API client (``identity`` signs decisions)."""
    return ControllerPorts(
        store=KubeStateStore(api, clock=clock, identity=identity),
        objects=KubeWorkloadObjects(api, identity=identity),
        pods=KubeServerPods(api),
        reports=KubeMachineReports(api),
        marks=KubeFleetMarks(api),
        health=KubeHealthRecords(api),
        events=KubeEventLog(api, identity=identity),
        watch=KubeWorkloadWatch(api),
        copies=KubeModelCopies(api),
    )


def kube_controller(
    api: Any, *, clock: Callable[[], datetime], identity: str, log: Callable[[str], None]
) -> Controller:
    """A controller acting on the cluster ``api`` talks to."""
    return Controller(kube_ports(api, clock=clock, identity=identity), clock=clock, log=log)
