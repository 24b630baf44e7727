"""Measured memory on the fleet: Pod peaks reported, recorded, then reserved by a later run.

The agent is the real code over ``FakeNvml`` and a ``/proc`` folder the test writes; each
qualification Pod is a real llama-server the test puts in the Pod's cgroup and on the card.
That real NVML lists a real Pod's server is proven only on a card (docs/adr/0010).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.catalog_file import catalog_json
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.qualifications import MEASUREMENTS_CONFIGMAP, KubeQualificationRecords
from nodeau.adapters.kube.reports import read_reports
from nodeau.domain.catalog import Catalog
from nodeau.domain.memory import GIB, MeasuredKey, MeasuredTable, Measurement
from nodeau.ports.cluster import ClusterError
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_measured import (
    CARD,
    CONTEXT,
    GPU,
    HELD,
    MACHINE,
    Machine,
    kubelet_and_nvml,
    qualification_pods,
)
from tests.support.real.kube_nodes import wait_for


def service(api: Any, name: str) -> Any:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


@pytest.fixture
def nodeau(cluster: Cluster, tmp_path: Path) -> Cli:
    catalog = tmp_path / "user-catalog.json"
    catalog.write_text(catalog_json(Catalog()), encoding="utf-8")
    return Cli(
        tmp_path / "home", timeout_s=600, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig), NODEAU_CATALOG=str(catalog),
    )  # fmt: skip


def test_a_qualified_pods_peak_is_measured_and_a_later_run_is_admitted_measured(
    fresh_fleet: client.ApiClient,
    cluster: Cluster,
    controller_process: subprocess.Popen[str],
    nodeau: Cli,
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    with Machine(api, cluster, tmp_path / "m1") as machine:
        wait_for(lambda: [rep.machine for rep in read_reports(api)] == [MACHINE], "m1's report")
        with kubelet_and_nvml(api, machine, tmp_path) as served:
            done = nodeau("model", "qualify", "tiny", "--context", CONTEXT, "--seed", "0",
                          "--json")  # fmt: skip
        log = (tmp_path / "controller.log").read_text()
        assert done.returncode == 0, done.stderr + log
        view = json.loads(done.stdout)
        assert view["card"] == CARD  # a card, not a simulated one
        memory = {m["task"]: m for m in view["memory"]}
        assert {t: m["peak_bytes"] for t, m in memory.items()} == HELD
        assert all(m["source"] == "nvml" and m["measured"] for m in memory.values())
        assert all(f"ctx={CONTEXT}," in m["config"] for m in memory.values())
        assert [task for _, task in served] == ["chat", "embed", "rerank"]
        assert qualification_pods(api) == []

        # the agent reported each Pod by its UID on the card, at what NVML said it held
        [report] = read_reports(api)
        assert {(p.pod_uid, p.gpu_uuid, p.peak_bytes) for p in report.pods} == {
            (uid, GPU, HELD[task]) for uid, task in served
        }

        # the measurements are in the cluster, keyed like one machine's
        table = KubeQualificationRecords(api).measurements()
        artifact = view["artifact"]
        assert {
            (m.key.artifact_id, m.key.gpu_model, m.key.config_key, m.peak_bytes)
            for m in table.measurements
        } == {(artifact, CARD, memory[t]["config"], HELD[t]) for t in HELD}

        # a run in the measured configuration: admitted by the real controller, measured
        run = nodeau("run", "tiny", "--name", "chat", "--context", CONTEXT, "--unproved",
                     "--wait", "60", "--json")  # fmt: skip
        assert run.returncode == 0, run.stderr + (tmp_path / "controller.log").read_text()
        started = json.loads(run.stdout)
        assert (started["source"], started["reserved_bytes"]) == ("measured", HELD["chat"])
        # another context was never measured: estimated (once the card is free again)
        assert nodeau("stop", "chat", "--workload").returncode == 0
        wait_for(lambda: service(api, "chat") is None, "chat gone (its card freed first)")
        other = nodeau("run", "tiny", "--name", "wide", "--context", "128", "--unproved",
                       "--wait", "60", "--json")  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert json.loads(other.stdout)["source"] == "estimated"


def test_the_cluster_keeps_the_newest_measurement_of_each_key(
    fresh_fleet: client.ApiClient,
) -> None:
    """The adapter's side of it: no measurement is kept until one is recorded, a newer one of
    the same key replaces the older, other keys stay, and a value that does not read is a
    one-line error naming its key."""
    records = KubeQualificationRecords(fresh_fleet)
    assert records.measurements() == MeasuredTable()
    key = MeasuredKey(artifact_id="ab" * 32, gpu_model=CARD, config_key="task=chat,ctx=256")
    other = MeasuredKey(artifact_id="ab" * 32, gpu_model=CARD, config_key="task=chat,ctx=512")
    records.record_measurement(Measurement(key=key, peak_bytes=GIB, note="first"))
    records.record_measurement(Measurement(key=other, peak_bytes=2 * GIB))
    records.record_measurement(Measurement(key=key, peak_bytes=3 * GIB, note="again"))
    table = records.measurements()
    assert table.lookup(key) == Measurement(key=key, peak_bytes=3 * GIB, note="again")
    assert table.lookup(other) == Measurement(key=other, peak_bytes=2 * GIB)
    assert len(table.measurements) == 2
    client.CoreV1Api(fresh_fleet).patch_namespaced_config_map(
        MEASUREMENTS_CONFIGMAP, r.NAMESPACE, {"data": {"cd" * 32: "[{not json"}}
    )
    with pytest.raises(ClusterError, match=f"{MEASUREMENTS_CONFIGMAP} key cdcd"):
        records.measurements()
