"""Choosing a service's recovery on a real API server: ``nodeau recovery set``, Event, same Pod.

The installed ``nodeau`` with NODEAU_PLANE=kubernetes; the controller in process, a pass at a
time. The model server's Pod is the same Pod afterwards (nothing restarts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.workloads import KubeWorkloadObjects
from nodeau.domain.workloads import RecoveryMode, Workload, WorkloadKind
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import (
    add_machine,
    controller,
    create,
    event_reasons,
    settle,
    small,
    status,
)


def workload(api: Any, name: str) -> Workload:
    found = KubeWorkloadObjects(api).get(WorkloadKind.SERVICE, name)
    assert found is not None and found.record is not None, name
    return found.record.workload


def pod_uid(api: Any, name: str) -> str:
    pod = client.CoreV1Api(api).read_namespaced_pod(f"service-{name}", r.NAMESPACE)
    assert pod.metadata is not None
    return str(pod.metadata.uid)


def test_a_recovery_choice_is_recorded_and_the_server_is_not_restarted(
    cluster: Cluster, fresh_fleet: Any, tmp_path: Path
) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 1, small("m1"))
    add_machine(api, "m2", 1, small("m2"))
    create(api, "chat", "qwen")
    ctl = controller(api)
    settle(
        ctl,
        lambda: (
            status(api, "chat").get("state") == "serving"
            and bool(status(api, "chat").get("endpoint"))
        ),
        "chat serving",
    )
    before = pod_uid(api, "chat")
    assert workload(api, "chat").recovery_mode is RecoveryMode.NEVER
    nodeau = Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )

    done = nodeau("recovery", "set", "chat", "automatic", "--after", "10m")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "chat: recovery is now automatic after 10m (was never); nothing restarts"
    )
    settle(
        ctl,
        lambda: workload(api, "chat").recovery_mode is RecoveryMode.AUTOMATIC,
        "the controller records the choice",
    )
    w = workload(api, "chat")
    assert (w.recovery_after.total_seconds(), w.machine, w.state.value) == (600, "m1", "serving")
    assert "RecoveryChosen" in event_reasons(api, "chat")
    ctl.resync()  # a later pass restarts nothing either
    assert pod_uid(api, "chat") == before
    assert status(api, "chat")["state"] == "serving"

    listing = nodeau.json("recovery", "status")
    assert isinstance(listing, dict)
    [row] = listing["services"]
    assert (row["name"], row["machine"], row["choice"]) == ("chat", "m1", "automatic after 10m")
    assert row["copies"] == ["m1", "m2"]
    assert listing["control_plane"].startswith("no machine is marked control plane")

    unknown = nodeau("recovery", "set", "nope", "never")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.splitlines()[-1] == (
        "nodeau: no workload called 'nope' in the cluster; nodeau ps lists them"
    )
    assert json.loads(nodeau("ps", "--json").stdout)[0]["state"] == "serving"
