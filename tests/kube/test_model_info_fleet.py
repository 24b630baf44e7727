"""``nodeau model info`` on a fleet: the cluster's newest evidence of an artifact, and its peaks.

Measured configurations apart from estimates; architecture values from a local verified copy,
else the reporting machine's; none of it for other bytes under the same alias. The fleet is
tests/support/real/kube_measured.py's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.catalog_file import catalog_json
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.adapters.kube.reports import read_reports
from nodeau.apps.cli.render import size
from nodeau.apps.models.actions import import_model
from nodeau.domain.artifacts import Sha256
from nodeau.domain.catalog import Catalog
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_measured import CARD, CONTEXT, HELD, MACHINE, Machine, kubelet_and_nvml
from tests.support.real.kube_nodes import wait_for

FROM_M1 = f"{MACHINE}'s verified copy (its agent's report)"


@pytest.fixture
def nodeau(cluster: Cluster, tmp_path: Path) -> Cli:
    catalog = tmp_path / "user-catalog.json"  # lists neither model: they claim what they prove
    catalog.write_text(catalog_json(Catalog()), encoding="utf-8")
    return Cli(
        tmp_path / "home", timeout_s=600, NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig), NODEAU_CATALOG=str(catalog),
    )  # fmt: skip


def info(cli: Cli, model: str) -> dict[str, Any]:
    found = cli.json("model", "info", model)
    assert isinstance(found, dict)
    return found


def states(view: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["capability"]: (c["state"], c["evidence"]) for c in view["capabilities"]}


def reported_tiny(api: Any) -> str | None:
    """The artifact m1's report names tiny now."""
    held = [a.id for rep in read_reports(api) for a in rep.artifacts if "tiny" in a.names]
    return held[0] if held else None


def test_model_info_on_the_fleet_shows_the_clusters_evidence_and_measured_configurations(
    fresh_fleet: client.ApiClient,
    cluster: Cluster,
    controller_process: subprocess.Popen[str],
    nodeau: Cli,
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    with Machine(api, cluster, tmp_path / "m1") as machine:
        wait_for(lambda: reported_tiny(api) is not None, "m1's report of tiny")
        before = info(nodeau, "tiny")
        assert {state for state, _ in states(before).values()} == {"never qualified"}
        assert (before["measured"], before["qualified"]) == ([], None)

        with kubelet_and_nvml(api, machine, tmp_path):
            done = nodeau("model", "qualify", "tiny", "--context", CONTEXT, "--seed", "0",
                          "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr + (tmp_path / "controller.log").read_text()
        run = json.loads(done.stdout)

        # this machine holds no copy: the cluster's evidence and measurements, m1's values
        fleet = info(nodeau, "tiny")
        assert fleet["artifact_id"] == run["artifact"] == reported_tiny(api)
        assert states(fleet) == {p["capability"]: (p["outcome"], p["why"]) for p in run["probes"]}
        assert f"on {CARD}, {run['runtime']}, context {CONTEXT}, seed 0" in fleet["qualified"]
        assert sorted(fleet["measured"], key=lambda m: m["config_key"]) == sorted(
            (
                {"artifact_id": run["artifact"], "gpu_model": CARD, "config_key": m["config"],
                 "peak_bytes": HELD[m["task"]], "source": "measured"}
                for m in run["memory"]
            ),
            key=lambda m: m["config_key"],
        )  # fmt: skip
        assert len(fleet["measured"]) == len(HELD)
        assert fleet["estimates"] and all(
            e["prediction"]["source"] == "estimated" for e in fleet["estimates"]
        )
        assert fleet["architecture_from"] == FROM_M1
        assert fleet["note"] == (
            "this machine holds no verified copy of tiny: its architecture values are those "
            f"{MACHINE} read from its own and reported"
        )
        assert fleet["summary"]["architecture"]["n_layers"] == 2
        text = nodeau("model", "info", "tiny").stdout
        assert f"note         {fleet['note']}" in text
        for m in fleet["measured"]:
            assert f"  {CARD}: {m['config_key']}: {size(m['peak_bytes'])} (measured)" in text
        assert "(estimated)" in text and "capabilities (qualified " in text

        # this machine's own verified copy of the same bytes: its values, the same JSON keys
        # and words as the machine plane where the data is the same
        tiny = tmp_path / "m1" / "tiny.gguf"
        assert nodeau("models", "import", str(tiny), "--alias", "tiny").returncode == 0
        here = info(nodeau, "tiny")
        assert (here["architecture_from"], here["note"]) == ("this machine's verified copy", None)
        assert {k: v for k, v in here.items() if k not in ("architecture_from", "note")} == {
            k: v for k, v in fleet.items() if k not in ("architecture_from", "note")
        }
        machine_plane = Cli(Path(nodeau.env["NODEAU_HOME"]), NODEAU_PLANE="machine",
                            NODEAU_CATALOG=nodeau.env["NODEAU_CATALOG"])  # fmt: skip
        local = info(machine_plane, "tiny")
        assert set(local) == set(here)
        same = ("model", "names", "artifact_id", "size_bytes", "summary", "architecture_from",
                "note", "estimates")  # fmt: skip
        assert {k: local[k] for k in same} == {k: here[k] for k in same}
        assert (local["measured"], local["qualified"]) == ([], None)  # not this machine's

        # other bytes imported under the used alias on m1: a new artifact, with none of it
        other = write_tiny_llama(tmp_path / "other.gguf", seed=4, quant="q8_0")
        import_model(other, alias="tiny", register=True, inspector=GgufModelInspector(),
                     store=machine.agent.store, registry=machine.agent.registry)  # fmt: skip
        new = Sha256.of_bytes(other.read_bytes()).hex
        wait_for(lambda: reported_tiny(api) == new, "m1 reports the new bytes as tiny")
        renamed = info(nodeau, "tiny")
        assert renamed["artifact_id"] == new != run["artifact"]
        assert {state for state, _ in states(renamed).values()} == {"never qualified"}
        assert (renamed["measured"], renamed["qualified"]) == ([], None)
        assert renamed["architecture_from"] == FROM_M1  # this machine's tiny is the old bytes
        # the old artifact keeps its own, by its id
        assert states(info(nodeau, run["artifact"][:12])) == states(fleet)
