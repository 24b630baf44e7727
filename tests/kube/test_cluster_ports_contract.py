"""The cluster ports' contract suite, rerun against the Kubernetes adapters on a real API server.

Every ``cluster`` test of tests/support/contracts/cluster_ports_contract.py is collected here
unchanged; the fixture below gives the adapters, so fake and adapters pass the same tests.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.kube import events as kube_events
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.copies import KubeModelCopies
from nodeau.adapters.kube.events import KubeEventLog
from nodeau.adapters.kube.health_store import KubeHealthRecords
from nodeau.adapters.kube.ledger import KubeReservationLedger
from nodeau.adapters.kube.marks import KubeFleetMarks
from nodeau.adapters.kube.pods import KubeServerPods
from nodeau.adapters.kube.reports import KubeMachineReports
from nodeau.adapters.kube.state_store import KubeStateStore
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.domain.lifecycle import ServerRestarts
from nodeau.domain.workloads import ExitKind, ServerExit, WorkloadKind
from tests.support.clock import ticking
from tests.support.contracts import cluster_ports_contract as contract
from tests.support.contracts import suite_of
from tests.support.real.kube_nodes import READINESS, kwok_node, stamp, wait_for

CONTRACT = suite_of(contract, "cluster")
globals().update(CONTRACT)


class KubeHarness:
    """The Kubernetes adapters on one API client, and KWOK for the machines."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.store = KubeStateStore(api, clock=ticking(contract.START), identity="c")
        self.objects = KubeWorkloadObjects(api, identity="c")
        self.pods = KubeServerPods(api)
        self.marks = KubeFleetMarks(api)
        self.reports = KubeMachineReports(api)
        self.health = KubeHealthRecords(api)
        self.ledger = KubeReservationLedger(api)
        self.events = KubeEventLog(api, identity="c")
        self.copies = KubeModelCopies(api)

    def add_node(self, name: str, *, control_plane: bool = False) -> None:
        labels = {r.CONTROL_PLANE_LABEL: ""} if control_plane else {}
        core: Any = client.CoreV1Api(self.api)  # plain dict bodies
        core.create_node(kwok_node(name, labels))

    def said(self, workload: str) -> list[str]:
        return [e.text for e in kube_events.read(self.api, workload)]

    def settle(self, done: Callable[[], bool], what: str) -> None:
        wait_for(done, what)

    def kubelet_says(
        self, kind: WorkloadKind, workload: str, restarts: ServerRestarts, *, ready: bool
    ) -> None:
        """Write the Pod's status as a kubelet would (KWOK leaves a Running Pod's alone)."""
        say_as_kubelet(self.api, f"{kind.value}-{workload}", restarts, ready=ready)

    def logs_unserved(self, machine: str) -> None:
        """Nothing to do: KWOK's machines have no kubelet to give logs."""


def go_duration(wait: timedelta) -> str:
    """A wait as Go prints a duration, as the kubelet's messages do ("1m20s", "20s")."""
    minutes, seconds = divmod(int(wait.total_seconds()), 60)
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


def terminated(ended: ServerExit, ran_for: timedelta) -> dict[str, Any]:
    """A container's terminated state as a kubelet writes it for this end."""
    if ended.kind is ExitKind.KILLED and ended.signal_name == "OOMKilled":
        code, reason = 137, "OOMKilled"
    elif ended.kind is ExitKind.KILLED:
        assert ended.signal is not None
        code, reason = 128 + ended.signal, "Error"
    else:
        assert ended.code is not None
        code, reason = ended.code, "Error" if ended.code else "Completed"
    return {
        "exitCode": code,
        "reason": reason,
        "startedAt": stamp(ended.at - ran_for),
        "finishedAt": stamp(ended.at),
        "containerID": "containerd://ended",
    }


def container_status(pod: str, restarts: ServerRestarts, ready: bool) -> dict[str, Any]:
    """The server container's status a kubelet would report for ``restarts``."""
    status: dict[str, Any] = {
        "name": "server",
        "image": r.SERVER_IMAGE,
        "imageID": "",
        "ready": ready,
        "restartCount": restarts.count,
        "state": {},
        "lastState": {},
    }
    ended = restarts.last_exit
    if ended is None:
        status["state"] = {"running": {"startedAt": stamp(datetime.now(UTC))}}
        return status
    assert restarts.ran_for is not None  # a kubelet always says when a run started
    end = terminated(ended, restarts.ran_for)
    if restarts.backing_off:
        back = "" if restarts.backoff is None else f"back-off {go_duration(restarts.backoff)} "
        message = f"{back}restarting failed container=server pod={pod}_{r.NAMESPACE}(uid)"
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        status["lastState"] = {"terminated": end}
    elif restarts.down:
        status["state"] = {"terminated": end}
    else:
        assert restarts.running_since is not None
        status["state"] = {"running": {"startedAt": stamp(restarts.running_since)}}
        status["lastState"] = {"terminated": end}
    return status


def say_as_kubelet(
    api: client.ApiClient, pod: str, restarts: ServerRestarts, *, ready: bool
) -> None:
    """Replace a Running Pod's status with what a kubelet would say: its server container's
    ends and restarts, and whether it is Ready (the Pod stays Running, its address kept)."""
    core: Any = client.CoreV1Api(api)
    wait_for(
        lambda: core.read_namespaced_pod(pod, r.NAMESPACE).status.phase == "Running",
        f"KWOK runs Pod {pod}",
    )
    body = api.sanitize_for_serialization(core.read_namespaced_pod(pod, r.NAMESPACE))
    flag = "True" if ready else "False"
    now = stamp(datetime.now(UTC))
    conditions = [c for c in body["status"].get("conditions", []) if c["type"] not in READINESS]
    conditions += [{"type": t, "status": flag, "lastTransitionTime": now} for t in READINESS]
    body["status"]["conditions"] = conditions
    body["status"]["containerStatuses"] = [container_status(pod, restarts, ready)]
    core.replace_namespaced_pod_status(pod, r.NAMESPACE, body)


@pytest.fixture
def cluster(fresh_fleet: client.ApiClient) -> KubeHarness:
    return KubeHarness(fresh_fleet)


def test_every_contract_test_runs_here() -> None:
    assert len(CONTRACT) >= 14
    assert all(globals()[name] is test for name, test in CONTRACT.items())
