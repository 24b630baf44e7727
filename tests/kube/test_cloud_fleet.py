"""Connecting a fleet to Nodeau Cloud, on a real API server: the installed ``nodeau``
(NODEAU_PLANE=kubernetes) signs in to a local fake cloud, its reporter sends the fleet's
machines and cards (metadata only, read through the same plane as ``nodeau fleet list``)
on its schedule, and an operation allowed at connect (drain) is carried out on the fleet
(the Node's label), one not allowed is refused and recorded; disconnect stops it all."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client

from nodeau.adapters.kube import resources as r
from tests.support.fakes.fake_cloud import FakeCloud, running_fake_cloud
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, gpu_uuid, small

INTERVAL_S = "0.5"  # reports and polls, for the test's sake (defaults: 300 s and 30 s)


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def test_a_connected_fleet_reports_its_machines_and_runs_only_what_was_allowed(
    cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path
) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 2, small("m1"))
    add_machine(api, "m2", 1)
    cli = Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
        NODEAU_CLOUD_REPORT_INTERVAL_S=INTERVAL_S,
        NODEAU_CLOUD_POLL_INTERVAL_S=INTERVAL_S,
        NODEAU_CLOUD_TIMEOUT_S="2",
    )
    fake = FakeCloud()
    with running_fake_cloud(fake) as url:
        try:
            done = cli("cloud", "connect", "--url", url, "--fleet", "--allow", "drain")
            assert done.returncode == 0, done.stderr
            wait_for("two reports", lambda: fake.report_count() >= 2)
            sent = json.dumps(fake.reports[-1])
            for uuid in (gpu_uuid("m1", 0), gpu_uuid("m1", 1), gpu_uuid("m2", 0)):
                assert uuid in sent
            fake.operations = [
                {"id": "op-1", "kind": "drain", "target": "m2"},
                {"id": "op-2", "kind": "stop-batch", "target": "job"},
            ]

            def drained() -> bool:
                node = client.CoreV1Api(api).read_node("m2")
                return (node.metadata.labels or {}).get(r.DRAINED_LABEL) == "true"

            wait_for("m2 drained by the allowed operation", drained)
            wait_for("both outcomes sent", lambda: len(fake.outcomes) >= 2)
            outcomes = {o["id"]: (o["outcome"], o["verdict"]) for o in fake.outcomes}
            assert outcomes == {
                "op-1": ("done", "allowed"),
                "op-2": ("refused", "not-allowed"),
            }
        finally:
            cli("cloud", "disconnect")
    shown = json.loads(cli("cloud", "status", "--json").stdout)
    assert shown["connected"] is False
