"""The node agent as a real process against a real API server: its Lease, report and silence."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.health_store import read_health
from nodeau.adapters.kube.reports import read_reports, read_signals
from nodeau.adapters.simulated_inventory import simulated_uuid
from nodeau.domain.artifacts import Sha256
from nodeau.domain.health import Health, MachineHealth, Signal
from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster, free_port, write_kubeconfig
from tests.support.real.kube_nodes import create_kwok_nodes, node_lease_renewed, wait_for

SIMULATED = "2 x 24 GiB"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A NODEAU_HOME holding one verified tiny model, imported with the CLI as a user would."""
    root = tmp_path_factory.mktemp("agent")
    model = write_tiny_llama(root / "tiny.gguf", seed=5)
    done = Cli(root / "home")("models", "import", str(model), "--alias", "tiny")
    assert done.returncode == 0, done.stderr
    return root / "home", Sha256.of_bytes(model.read_bytes()).hex


def agent_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
    return {
        **env,
        "NODEAU_HOME": str(home),
        "NODEAU_SIMULATED_GPUS": SIMULATED,
        "NODEAU_DISK_RESERVE_BYTES": "0",
        **extra,
    }


def agent_args(kubeconfig: Path, machine: str, *more: str) -> list[str]:
    return [sys.executable, "-m", "nodeau.apps.agent", "--kubeconfig", str(kubeconfig),
            "--machine", machine, *more]  # fmt: skip


def start_agent(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A background agent writing its lines to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture
def looping(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Agents a test starts in the background; any still running at the end are killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_one_round_publishes_the_machines_cards_and_verified_model(
    fresh_fleet: client.ApiClient, cluster: Cluster, home: tuple[Path, str]
) -> None:
    folder, sha = home
    done = subprocess.run(
        agent_args(cluster.kubeconfig, "garage", "--once"),
        env=agent_env(folder), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "nodeau-agent: published the report of garage: 2 simulated GPU(s), 1 verified model(s)"
    ]
    lease: Any = client.CoordinationV1Api(fresh_fleet).read_namespaced_lease(
        r.agent_lease_name("garage"), r.NAMESPACE
    )
    assert lease.spec.holder_identity == "garage"
    assert lease.metadata.labels[r.MACHINE_LABEL] == "garage"
    [report] = read_reports(fresh_fleet)
    assert report.machine == "garage" and report.reading.simulated
    assert [g.gpu.uuid for g in report.reading.gpus] == [simulated_uuid("garage", i)
                                                         for i in range(2)]  # fmt: skip
    assert all(g.gpu.simulated and g.driver_version == "simulated" for g in report.reading.gpus)
    [artifact] = report.artifacts
    assert (artifact.id, artifact.names) == (sha, ("tiny",))
    assert Path(artifact.path).is_relative_to(folder)
    assert Sha256.of_bytes(Path(artifact.path).read_bytes()).hex == sha
    assert lease.spec.renew_time == report.at


def test_a_stopped_agent_goes_quiet_and_the_controller_records_the_machine_degraded(
    fresh_fleet: client.ApiClient,
    cluster: Cluster,
    home: tuple[Path, str],
    looping: list[subprocess.Popen[bytes]],
    controller: None,
    tmp_path: Path,
) -> None:
    """The agent process and the controller process (default graces: the agent's report is
    quiet 30 s after its last renewal): the controller records garage reporting while the
    agent runs, and degraded, with only the agent quiet, once it has stopped."""
    create_kwok_nodes(fresh_fleet, ["garage"])
    wait_for(lambda: node_lease_renewed(fresh_fleet, "garage"), "garage's node Lease")
    agent = start_agent(
        agent_args(cluster.kubeconfig, "garage", "--interval", "0.2"),
        agent_env(home[0]), tmp_path / "agent.log",
    )  # fmt: skip
    looping.append(agent)

    def agent_seen() -> datetime | None:
        return read_signals(fresh_fleet)["garage"].agent_report_at

    def recorded() -> MachineHealth | None:
        return read_health(fresh_fleet).get("garage")

    wait_for(lambda: agent_seen() is not None, "the agent's first report")
    first = agent_seen()
    wait_for(lambda: agent_seen() != first, "the agent renewing its Lease")
    wait_for(
        lambda: (h := recorded()) is not None and h.state is Health.REPORTING,
        "the controller recording garage reporting", 60,
    )  # fmt: skip
    assert recorded() == MachineHealth(
        state=Health.REPORTING, since=None, quiet=frozenset(),
        sentence="reporting: both signals fresh",
    )  # fmt: skip

    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=60) == 0
    output = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in output
    stopped = "nodeau-agent: stopped; the Lease of garage is left to go quiet"
    assert output.splitlines()[-1] == stopped
    last = agent_seen()
    assert last is not None

    wait_for(
        lambda: (h := recorded()) is not None and h.state is Health.DEGRADED,
        "the controller recording garage degraded", 90,
    )  # fmt: skip
    quiet_at = last + timedelta(seconds=30)  # its last renewal plus the agent's grace
    assert recorded() == MachineHealth(
        state=Health.DEGRADED, since=quiet_at, quiet=frozenset({Signal.AGENT_REPORT}),
        sentence=f"degraded: Nodeau's agent is quiet since {quiet_at:%H:%M:%S}; nothing moves",
    )  # fmt: skip
    assert node_lease_renewed(fresh_fleet, "garage")  # its kubelet still answers
    assert agent_seen() == last  # nobody renewed it after the agent stopped
    assert read_reports(fresh_fleet)[0].at == last  # its last report is still there to read


def test_an_agent_without_a_cluster_keeps_trying_and_recovers(
    fresh_fleet: client.ApiClient,
    cluster: Cluster,
    home: tuple[Path, str],
    looping: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "later" / "kubeconfig"
    log_path = tmp_path / "agent.log"
    agent = start_agent(agent_args(kubeconfig, "attic", "--interval", "0.2"),
                        agent_env(home[0]), log_path)  # fmt: skip
    looping.append(agent)
    missing = f"nodeau-agent: cannot publish: {kubeconfig}: no such kubeconfig file"
    wait_for(lambda: missing in log_path.read_text(), "the agent saying it has no kubeconfig")
    assert agent.poll() is None  # still running: a later round may find it

    kubeconfig.parent.mkdir()
    kubeconfig.write_text(cluster.kubeconfig.read_text())
    wait_for(lambda: any(rep.machine == "attic" for rep in read_reports(fresh_fleet)),
             "the agent's report once the kubeconfig exists")  # fmt: skip
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=60) == 0
    lines = log_path.read_text().splitlines()
    assert lines.count(missing) == 1  # said once, not every round
    assert lines[1:] == [
        "nodeau-agent: published the report of attic: 2 simulated GPU(s), 1 verified model(s)",
        "nodeau-agent: stopped; the Lease of attic is left to go quiet",
    ]


def test_an_unreachable_server_is_one_line_and_a_failed_round(
    cluster: Cluster, home: tuple[Path, str], tmp_path: Path
) -> None:
    port = free_port()
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(
        kubeconfig, server=f"https://127.0.0.1:{port}", ca_file=cluster.ca_file,
        token=cluster.token, user="admin",
    )  # fmt: skip
    done = subprocess.run(
        agent_args(kubeconfig, "garage", "--once"),
        env=agent_env(home[0]), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(
        f"nodeau-agent: cannot publish: the cluster at https://127.0.0.1:{port} does not answer ("
    )


def test_simulated_cards_it_cannot_read_stop_the_agent_with_one_line(
    cluster: Cluster, home: tuple[Path, str]
) -> None:
    done = subprocess.run(
        agent_args(cluster.kubeconfig, "garage", "--once"),
        env=agent_env(home[0], NODEAU_SIMULATED_GPUS="lots of GPUs"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("nodeau-agent: NODEAU_SIMULATED_GPUS: bad simulated hardware spec")
