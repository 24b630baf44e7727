"""A user's whole path on a fleet, from ``nodeau run`` to serving, and a machine going quiet.

The real controller process (its ServiceAccount, deploy/'s RBAC) admits and pins the Pod; a
machine whose own KWOK is stopped (tests/support/real/kube_lossy.py) holds its service, which
resumes there when it answers again; the controller's log says both.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.ledger import read_ledger
from nodeau.adapters.kube.reports import publish_report
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, gpu_uuid, report, small
from tests.support.real.kube_lossy import lossy_machines
from tests.support.real.kube_nodes import wait_for

# The test models are stand-ins (a made-up or random-weight GGUF) that prove nothing: serving
# them is the user's explicit choice (docs/adr/0010).
UNPROVED = ("--unproved",)


def pod_of(api: client.ApiClient, name: str) -> Any:
    try:
        return client.CoreV1Api(api).read_namespaced_pod(f"service-{name}", r.NAMESPACE)
    except client.ApiException as exc:
        assert exc.status == 404
        return None


def fleet_cli(cluster: Cluster, tmp_path: Path) -> Cli:
    return Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )


def ps_rows(cli: Cli) -> list[dict[str, Any]]:
    rows = cli.json("ps")
    assert isinstance(rows, list)
    return rows


def test_run_reaches_the_controller_which_admits_and_pins_a_pod_to_its_card(
    cluster: Cluster,
    fresh_fleet: client.ApiClient,
    controller_process: subprocess.Popen[str],
    tmp_path: Path,
) -> None:
    api = fresh_fleet
    add_machine(api, "m1", 2, small("m1"))
    cli = fleet_cli(cluster, tmp_path)
    done = cli("run", "qwen", "--name", "chat", "--wait", "60", "--json", *UNPROVED)
    assert done.returncode == 0, done.stderr + (tmp_path / "controller.log").read_text()
    started = json.loads(done.stdout)
    card = gpu_uuid("m1", 0)
    assert (started["workload"]["machine"], started["workload"]["gpu"]) == ("m1", card)
    assert started["source"] == "estimated" and started["reserved_bytes"] > 0

    pod = pod_of(api, "chat")
    assert pod is not None, "the controller made no model-server Pod"
    assert pod.spec.node_name == "m1"
    [container] = pod.spec.containers
    assert {e.name: e.value for e in container.env}["NVIDIA_VISIBLE_DEVICES"] == card

    def serving() -> bool:
        return [(w["name"], w["state"]) for w in ps_rows(cli)] == [("chat", "serving")]

    wait_for(serving, "KWOK runs the Pod and the controller records the service serving")
    [row] = ps_rows(cli)
    assert row["machine"] == "m1" and row["gpu"] == card
    assert row["sentence"].startswith("serving on m1 (GPU-m1-0…) since ")
    assert row["endpoint"] == started["workload"]["endpoint"]  # the loopback address run gave
    assert row["endpoint"].startswith("http://127.0.0.1:")
    assert controller_process.poll() is None  # it kept running: nothing it did was refused


class Agent:
    """Nodeau's agent on ``machine``: its report renewed every few seconds unless quiet."""

    def __init__(self, api: client.ApiClient, machine: str) -> None:
        self.api, self.machine, self.quiet = api, machine, False
        self.renewed: datetime | None = None
        self.renew()

    def renew(self) -> None:
        now = datetime.now(UTC)
        if self.quiet or (self.renewed and now - self.renewed < timedelta(seconds=3)):
            return
        publish_report(self.api, report(self.machine, 1, small(self.machine), at=now))
        self.renewed = now


def until(agent: Agent, predicate: Callable[[], bool], what: str, timeout_s: float) -> None:
    """``wait_for`` with the agent renewing its report between looks, as a running one does."""

    def step() -> bool:
        agent.renew()
        return predicate()

    wait_for(step, what, timeout_s)


def test_a_machine_that_goes_quiet_holds_its_service_and_answering_again_resumes_it(
    cluster: Cluster,
    fresh_fleet: client.ApiClient,
    controller_process: subprocess.Popen[str],
    tmp_path: Path,
) -> None:
    """``nodeau run`` with recovery off (the default): the real controller, as its
    ServiceAccount, admits it on l1's card; l1's kubelet and agent go quiet, the controller
    records the service held (nothing stopped, moved or released); l1 answers again and the
    controller resumes it there, on the same card, with the same Pod."""
    api = fresh_fleet
    log = tmp_path / "controller.log"
    cli = fleet_cli(cluster, tmp_path)
    card = gpu_uuid("l1", 0)
    with lossy_machines(cluster, api, "l1") as lossy:
        agent = Agent(api, "l1")
        done = cli("run", "qwen", "--name", "chat", "--wait", "60", "--json", *UNPROVED)
        assert done.returncode == 0, done.stderr + log.read_text()
        assert json.loads(done.stdout)["workload"]["gpu"] == card

        def state_is(wanted: str) -> Callable[[], bool]:
            return lambda: [(w["name"], w["state"]) for w in ps_rows(cli)] == [("chat", wanted)]

        until(agent, state_is("serving"), "chat serving on l1", 90)
        pod = pod_of(api, "chat")
        assert pod is not None and pod.spec.node_name == "l1"

        lossy["l1"].off()
        agent.quiet = True
        until(agent, state_is("held"), "the controller holding chat: l1 stopped answering", 150)
        [row] = ps_rows(cli)
        assert (row["machine"], row["gpu"]) == ("l1", card)
        assert re.fullmatch(
            r"held since \d\d:\d\d:\d\d \(\d+[smhd]\): l1 stopped answering; "
            r"recovery is off, so it waits for l1",
            row["sentence"],
        ), row["sentence"]
        held_pod = pod_of(api, "chat")  # nothing stopped or moved: the same Pod, on l1
        assert held_pod is not None and held_pod.metadata.uid == pod.metadata.uid
        assert [(x.workload, x.machine, x.gpu_uuid) for x in read_ledger(api).reservations] == [
            ("chat", "l1", card)
        ]  # its card stays reserved for it

        lossy["l1"].on()
        agent.quiet = False
        until(agent, state_is("serving"), "chat resumed and serving on l1 again", 120)
        [row] = ps_rows(cli)
        assert (row["machine"], row["gpu"]) == ("l1", card)
        assert row["sentence"].startswith("serving on l1 (GPU-l1-0…) since ")
        back = pod_of(api, "chat")
        assert back is not None and back.metadata.uid == pod.metadata.uid
        assert [(x.workload, x.machine) for x in read_ledger(api).reservations] == [("chat", "l1")]

    decided = [line.split(" ", 1)[1] for line in log.read_text().splitlines() if " chat: " in line]
    held = [i for i, x in enumerate(decided) if x.startswith("chat: held (unreachable since ")]
    resumed = [i for i, x in enumerate(decided) if x.startswith("chat: starting (")]
    assert held and resumed and held[0] < resumed[-1], log.read_text()  # decided by the process
    assert controller_process.poll() is None  # nothing it did was refused by its RBAC
