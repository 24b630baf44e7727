"""The installed ``nodeau`` against a real API server: the fleet on Kubernetes from a terminal.

NODEAU_PLANE=kubernetes with the test cluster's kubeconfig; the test writes each object's status
as the controller would, so what is checked is the CLI: what it asks, waits for, prints, deletes.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from returns.result import Success

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.health_store import read_health
from nodeau.adapters.kube.report_form import MachineReport
from nodeau.adapters.kube.reports import publish_report, read_reports
from nodeau.adapters.record_json import pack, to_plain
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.adapters.sqlite_state import SqliteStateStore
from nodeau.apps.cli.ps_command import short_gpu
from nodeau.domain.health import Health
from nodeau.domain.reservations import Ledger, Reservation
from nodeau.ports.state import Admission, Snapshot, WorkloadRecord
from tests.support.builders.admissions import decider, fleet_of
from tests.support.real.cli import Cli
from tests.support.real.kube_cli import banner, one_line_error, write_ledger
from tests.support.real.kube_cluster import Cluster, write_kubeconfig
from tests.support.real.kube_nodes import create_kwok_nodes, wait_for

# The test models are stand-ins (a made-up or random-weight GGUF) that prove nothing: serving
# them is the user's explicit choice (docs/adr/0010).
UNPROVED = ("--unproved",)

NOW = datetime.now(UTC).replace(microsecond=123456)  # a whole second trips reports.py (told)


@pytest.fixture
def cli(cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path) -> Cli:
    return Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )


@pytest.fixture
def api(fresh_fleet: client.ApiClient) -> Iterator[client.ApiClient]:
    yield fresh_fleet


def write_health_configmap(api: client.ApiClient, health: dict[str, Any]) -> None:
    """The controller's last assessment, in the records' JSON form (ConfigMap nodeau-health)."""
    data = {machine: json.dumps(h) for machine, h in health.items()}
    client.CoreV1Api(api).create_namespaced_config_map(
        r.NAMESPACE, {"metadata": {"name": r.HEALTH_CONFIGMAP}, "data": data}
    )


def labels_of(api: client.ApiClient, node: str) -> dict[str, str]:
    return dict(client.CoreV1Api(api).read_node(node).metadata.labels or {})


def custom(api: client.ApiClient) -> Any:
    return client.CustomObjectsApi(api)


def gpuservice(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = custom(api).get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, name
        )
    except ApiException as exc:
        assert exc.status == 404
        return None
    return found


def write_status(api: client.ApiClient, name: str, status: dict[str, Any]) -> None:
    """What the controller does: replace the object's status through the status subresource.

    (A replace, not a merge patch: in a merge patch a null, such as a card's
    ``held_by: null`` in the admission, would delete the key.)
    """
    body = custom(api).get_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, name
    )
    body["status"] = status
    custom(api).replace_namespaced_custom_object_status(
        r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, name, body
    )


def condition(kind: str, ok: bool, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_fleet_list_shows_nodes_reports_health_marks_and_held_cards(
    cli: Cli, cluster: Cluster, api: client.ApiClient
) -> None:
    create_kwok_nodes(api, ["n1", "n2"])
    reading = SimulatedGpuInventory("n1", "2 x 24 GiB").read()
    publish_report(api, MachineReport(reading=reading, at=NOW))
    held, free = (g.gpu.uuid for g in reading.gpus)
    write_ledger(api, [{"workload": "chat", "machine": "n1", "gpu_uuid": held, "bytes": 1 << 30}])
    write_health_configmap(api, {"n1": {"state": "reporting", "since": None, "quiet": [],
                                        "sentence": "reporting: both signals fresh"}})  # fmt: skip
    assert read_health(api)["n1"].state is Health.REPORTING  # a record the controller could write
    client.CoreV1Api(api).patch_node("n2", {"metadata": {"labels": {r.DRAINED_LABEL: "true"}}})

    done = cli("fleet", "list")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [banner(cluster)]
    lines = done.stdout.splitlines()
    assert lines[0] == "plane: " + banner(cluster).removeprefix("nodeau: ")
    assert lines[1] == "fleet policy: pack (new placements only)"
    rows = {line.split()[0]: line for line in lines[3:]}
    assert rows["n1"].split()[1:6] == ["reporting", "no", "no", "pack", "yes"]
    assert f"{held} (24.00 GiB, held by chat)" in rows["n1"]
    assert f"{free} (24.00 GiB, free)" in rows["n1"]
    assert "not yet assessed" in rows["n2"] and "no agent report yet" in rows["n2"]
    assert rows["n2"].split()[4:6] == ["yes", "no"]  # drained, not upgrading

    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict)
    machines = {m["machine"]: m for m in listing["machines"]}
    assert sorted(machines) == ["n1", "n2"]
    assert [g["held_by"] for g in machines["n1"]["gpus"]] == ["chat", None]
    assert machines["n2"]["health"] == "not yet assessed" and machines["n2"]["drained"] is True


def test_drain_and_undrain_are_a_label_and_touch_no_pod(cli: Cli, api: client.ApiClient) -> None:
    create_kwok_nodes(api, ["n1"])
    core = client.CoreV1Api(api)
    pod = core.create_namespaced_pod(
        r.NAMESPACE,
        {
            "metadata": {"name": "service-chat", "labels": {r.WORKLOAD_LABEL: "chat"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "server", "image": "x"}]},
        },
    )
    write_ledger(api, [{"workload": "chat", "machine": "n1", "gpu_uuid": "GPU-1", "bytes": 1024}])

    done = cli("scheduling", "drain", "--node", "n1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "n1 is drained: nothing new is placed there; "
        "its 1 running workload(s) are not stopped, moved or restarted"
    )
    node = core.read_node("n1")
    assert node.metadata.labels[r.DRAINED_LABEL] == "true"
    assert datetime.fromisoformat(node.metadata.annotations[r.DRAINED_AT_ANNOTATION]) <= (
        datetime.now(UTC)
    )

    done = cli("scheduling", "undrain", "--node", "n1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "n1 takes new placements again; nothing is moved back to it"
    node = core.read_node("n1")
    assert r.DRAINED_LABEL not in (node.metadata.labels or {})
    assert r.DRAINED_AT_ANNOTATION not in (node.metadata.annotations or {})

    after = core.read_namespaced_pod("service-chat", r.NAMESPACE)
    assert after.metadata.uid == pod.metadata.uid
    assert after.metadata.deletion_timestamp is None and after.spec.node_name == "n1"

    line = one_line_error(cli("scheduling", "drain", "--node", "nowhere"))
    assert (
        line == "nodeau: no machine called 'nowhere' in the cluster; nodeau fleet list lists them"
    )


def test_policy_fleet_wide_then_per_machine(cli: Cli, api: client.ApiClient) -> None:
    create_kwok_nodes(api, ["n1", "n2"])
    write_ledger(api, [{"workload": "a", "machine": "n2", "gpu_uuid": "GPU-2", "bytes": 1024}])
    core = client.CoreV1Api(api)

    done = cli("scheduling", "policy", "spread")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "fleet policy is now spread; it applies to new placements only, "
        "1 running workload(s) stay where they are"
    )
    held = core.read_namespaced_config_map(r.SCHEDULING_CONFIGMAP, r.NAMESPACE)
    assert held.data == {r.POLICY_KEY: "spread"}

    done = cli("scheduling", "policy", "pack", "--node", "n2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "n2 now uses pack (its own override); it applies to new placements only, "
        "1 running workload(s) there stay where they are"
    )
    assert labels_of(api, "n2")[r.POLICY_LABEL] == "pack"
    assert r.POLICY_LABEL not in labels_of(api, "n1")

    listing = cli.json("fleet", "list")
    assert isinstance(listing, dict) and listing["fleet_policy"] == "spread"
    policies = {m["machine"]: (m["policy"], m["policy_from"]) for m in listing["machines"]}
    assert policies == {"n1": ("spread", "the fleet policy"), "n2": ("pack", "its own override")}

    done = cli("scheduling", "policy", "pack")  # the ConfigMap exists now: changed in place
    assert done.returncode == 0, done.stderr
    held = core.read_namespaced_config_map(r.SCHEDULING_CONFIGMAP, r.NAMESPACE)
    assert held.data == {r.POLICY_KEY: "pack"}


def openssl_pin(ca_file: Path) -> str:
    """kubeadm's documented way to compute the pin, with openssl (independent of our code)."""
    pubkey = subprocess.run(
        ["openssl", "x509", "-pubkey", "-noout", "-in", str(ca_file)],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"], input=pubkey, capture_output=True,
        check=True,
    ).stdout  # fmt: skip
    digest = subprocess.run(
        ["openssl", "dgst", "-sha256", "-hex"], input=der, capture_output=True, check=True
    ).stdout.decode()
    return "sha256:" + digest.split("=")[-1].strip()


def test_invite_creates_a_bootstrap_token_and_prints_the_join_command(
    cli: Cli, cluster: Cluster, api: client.ApiClient
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    done = cli("fleet", "invite", "--ttl", "2h")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == banner(cluster)
    words = done.stdout.split()
    assert words[:3] == ["nodeau", "join", cluster.server] and len(done.stdout.splitlines()) == 1
    assert words[3] == "--token" and words[5] == "--ca-cert-hash"
    token_id, token_secret = words[4].split(".")
    assert words[6] == openssl_pin(cluster.ca_file)

    secret = client.CoreV1Api(api).read_namespaced_secret(
        f"bootstrap-token-{token_id}", "kube-system"
    )
    data = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    assert secret.type == "bootstrap.kubernetes.io/token"
    assert data["token-id"] == token_id and data["token-secret"] == token_secret
    assert len(token_id) == 6 and len(token_secret) == 16
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubeadm:default-node-token"
    expires = datetime.fromisoformat(data["expiration"].replace("Z", "+00:00"))
    assert before + timedelta(hours=2) <= expires <= datetime.now(UTC) + timedelta(hours=2)
    client.CoreV1Api(api).delete_namespaced_secret(f"bootstrap-token-{token_id}", "kube-system")


def test_join_dry_run_checks_the_cluster_prints_the_step_and_writes_nothing(
    cluster: Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    machine_cli = Cli(home, timeout_s=120)  # no NODEAU_PLANE: the plane file would decide
    pin = openssl_pin(cluster.ca_file)
    done = machine_cli(
        "join", cluster.server, "--token", "abcdef.0123456789abcdef", "--ca-cert-hash", pin,
        "--kubeconfig", str(cluster.kubeconfig), "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    endpoint = cluster.server.removeprefix("https://")
    step = (
        f"kubeadm join {endpoint} --token abcdef.0123456789abcdef "
        f"--discovery-token-ca-cert-hash {pin}"
    )
    assert done.stdout.splitlines() == [
        f"node-join step (not run: --dry-run): {step}",
        f"dry run: {cluster.kubeconfig} reaches the cluster and its CA matches the pin; "
        "nothing was run or written (without --dry-run, nodeau join joins this machine)",
    ]
    assert not (home / "plane.json").exists()
    assert read_reports(api) == ()  # no report was published either
    listed = Cli(home, timeout_s=120, NODEAU_SIMULATED_GPUS="1 x 8 GiB")("fleet", "list")
    assert listed.returncode == 0 and listed.stderr == ""
    assert listed.stdout.startswith("plane: one machine")  # still this machine alone


def test_join_calls_the_kubeadm_on_path_with_the_join_step_and_publishes_the_first_report(
    cluster: Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    bin_dir, calls = tmp_path / "bin", tmp_path / "kubeadm-calls"
    bin_dir.mkdir()
    fake = bin_dir / "kubeadm"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {calls}\n')
    fake.chmod(0o755)
    home = tmp_path / "home"
    joining = Cli(
        home, timeout_s=120, NODEAU_SIMULATED_GPUS="2 x 16 GiB",
        PATH=f"{bin_dir}:/usr/bin:/bin",
    )  # fmt: skip
    pin = openssl_pin(cluster.ca_file)
    done = joining(
        "join", cluster.server, "--token", "abcdef.0123456789abcdef", "--ca-cert-hash", pin,
        "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    endpoint = cluster.server.removeprefix("https://")
    assert calls.read_text().split() == [
        "join", endpoint, "--token", "abcdef.0123456789abcdef",
        "--discovery-token-ca-cert-hash", pin,
    ]  # fmt: skip
    assert "agent report: published for testbox" in done.stdout
    reports = {rep.machine: rep for rep in read_reports(api)}
    assert [len(reports["testbox"].reading.gpus)] == [2]
    assert reports["testbox"].reading.simulated
    plane = json.loads((home / "plane.json").read_text())
    assert plane == {"plane": "kubernetes", "kubeconfig": str(cluster.kubeconfig), "context": None}

    listed = joining("fleet", "list")  # no NODEAU_PLANE: the plane file decides
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [banner(cluster)]
    forced = Cli(home, timeout_s=120, NODEAU_PLANE="machine", NODEAU_SIMULATED_GPUS="1 x 8 GiB")
    local = forced("fleet", "list")
    assert local.returncode == 0 and local.stderr == ""
    assert local.stdout.startswith("plane: one machine")


def recording_kubeadm(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose kubeadm records that it was called, and where it records it."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "kubeadm-calls"
    bin_dir.mkdir()
    fake = bin_dir / "kubeadm"
    fake.write_text(f"#!/bin/sh\ntouch {calls}\n")
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}, calls


def test_join_with_a_pin_that_is_not_the_clusters_runs_nothing_and_writes_nothing(
    cluster: Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    path, calls = recording_kubeadm(tmp_path)
    home = tmp_path / "home"
    pin, wrong = openssl_pin(cluster.ca_file), "sha256:" + "ab" * 32
    done = Cli(home, timeout_s=120, **path)(
        "join", cluster.server, "--token", "abcdef.0123456789abcdef", "--ca-cert-hash", wrong,
        "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert one_line_error(done) == (
        f"nodeau: --ca-cert-hash is not the CA of the cluster {cluster.kubeconfig} reaches (its "
        f"pin is {pin}): the kubeconfig is for another cluster or the pin was mistyped; use the "
        "command nodeau fleet invite printed; nothing was run or written"
    )
    assert "registered" not in done.stdout
    assert not calls.exists() and not (home / "plane.json").exists()
    assert read_reports(api) == ()


def test_join_with_no_kubeconfig_that_reaches_the_cluster_runs_nothing_and_writes_nothing(
    cluster: Cluster, tmp_path: Path
) -> None:
    path, calls = recording_kubeadm(tmp_path)
    home, closed = tmp_path / "home", tmp_path / "closed-port"
    write_kubeconfig(  # the cluster's own CA, so only the answer is missing
        closed, server="https://127.0.0.1:9", ca_file=cluster.ca_file, token="x", user="someone"
    )
    for config in (closed, tmp_path / "no-such-kubeconfig"):
        done = Cli(home, timeout_s=120, **path)(
            "join", cluster.server, "--token", "abcdef.0123456789abcdef",
            "--ca-cert-hash", openssl_pin(cluster.ca_file), "--kubeconfig", str(config),
        )  # fmt: skip
        line = one_line_error(done)
        assert line.startswith("nodeau: no kubeconfig here reaches the fleet ("), line
        assert line.endswith(
            f"): put the fleet's kubeconfig at {config} or give --kubeconfig, then run nodeau "
            "join again; nothing was run or written"
        )
        assert "registered" not in done.stdout
        assert not calls.exists() and not (home / "plane.json").exists()


@pytest.mark.parametrize(
    ("token", "pin", "said"),
    [
        ("abcdef0123456789abcdef", "sha256:" + "a" * 64, "--token must look like"),
        ("ABCDEF.0123456789abcdef", "sha256:" + "a" * 64, "--token must look like"),
        ("abcdef.0123456789abcdef", "a" * 64, "--ca-cert-hash must be sha256:"),
        ("abcdef.0123456789abcdef", "sha256:" + "g" * 64, "--ca-cert-hash must be sha256:"),
    ],
)
def test_join_rejects_a_malformed_token_or_pin_in_one_line(
    tmp_path: Path, token: str, pin: str, said: str
) -> None:
    home = tmp_path / "home"
    done = Cli(home)("join", "https://10.0.0.1:6443", "--token", token, "--ca-cert-hash", pin)
    assert one_line_error(done).startswith(f"nodeau: {said}")
    assert not (home / "plane.json").exists()


def admission_for(name: str) -> Admission:
    decide = decider(name, fleet_of(2), NOW)
    outcome = decide(Snapshot(ledger=Ledger(), workloads=()))
    assert isinstance(outcome, Success)
    return outcome.unwrap()


def test_run_prints_a_status_written_as_the_controller_writes_it_then_ps_explain_and_stop(
    cli: Cli, api: client.ApiClient, tmp_path: Path
) -> None:
    """No controller runs: the test writes an admission (on m1 of a made-up two-card fleet,
    no such node) as the controller's status. What is proven is the CLI's side: what run
    asks for, how it waits and prints, and that ps, explain and stop read the cluster. A
    real controller admitting ``nodeau run`` is tests/kube/test_whole_path.py's."""
    running = cli.start("run", "qwen-race", "--name", "chat-1", "--context", "4096", *UNPROVED)
    wait_for(lambda: gpuservice(api, "chat-1") is not None, "the GPUService is created")
    spec = gpuservice(api, "chat-1")["spec"]  # type: ignore[index]
    assert spec["model"] == "qwen-race" and spec["contextTokens"] == 4096
    assert spec["endpoint"] == "serving" and spec["recoveryAfterSeconds"] == 180
    admission = admission_for("chat-1")
    record = admission.record
    write_status(
        api, "chat-1",
        {
            "state": "admitted", "sentence": "admitted", "machine": record.workload.machine,
            "gpuUUID": record.workload.gpu_uuid,
            "reservedBytes": admission.placement.reservation.bytes, "source": "estimated",
            "endpoint": "http://10.1.2.3:8080/v1", "decidedBy": "test",
            "record": to_plain(record, WorkloadRecord), "admission": pack(admission, Admission),
            "reservation": to_plain(admission.placement.reservation, Reservation),
            "conditions": [condition("Admitted", True, "Admitted", "fits")],
        },
    )  # fmt: skip
    out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        f"chat-1: admitted on m1, {record.workload.gpu_uuid}, reserving 9.00 GiB (estimated)"
    )
    assert lines[1].startswith("state admitted: admitted on m1 (GPU-0000…) since ")
    # the address a client keeps: this machine's loopback endpoint, wherever it serves
    loopback = re.fullmatch(r"serving at (http://127\.0\.0\.1:\d+/v1) \(endpoint: .+\)", lines[2])
    assert loopback is not None, lines[2]

    rows = cli.json("ps")
    assert isinstance(rows, list) and [row["name"] for row in rows] == ["chat-1"]
    assert rows[0]["state"] == "admitted" and rows[0]["name"] == "chat-1"
    assert rows[0]["endpoint"] == loopback.group(1)
    table = cli("ps")
    assert table.stdout.splitlines()[1].split()[:6] == [
        "chat-1", "service", "qwen-race", "m1", short_gpu(record.workload.gpu_uuid), "admitted",
    ]  # fmt: skip
    address, sentence = table.stdout.splitlines()[2:]
    assert address == f"  {rows[0]['endpoint']}"
    # the same sentence, read a moment later: its "(Ns)" may have grown
    elapsed = re.compile(r"\(\d+[smhd]\)")
    assert elapsed.sub("", sentence) == elapsed.sub("", f"  {rows[0]['sentence']}")

    # the same admission recorded by the one-machine plane prints the same explanation
    machine_home = tmp_path / "machine"
    machine_home.mkdir()
    store = SqliteStateStore(machine_home / "state.sqlite3", lambda: NOW)
    store.admit("chat-1", decider("chat-1", fleet_of(2), NOW)).unwrap()
    on_machine = Cli(machine_home, NODEAU_PLANE="machine")
    for command in ("service", "placement"):
        here, there = cli(command, "explain", "chat-1"), on_machine(command, "explain", "chat-1")
        assert here.returncode == there.returncode == 0, here.stderr + there.stderr
        assert here.stdout == there.stdout and "chat-1" in here.stdout

    assert cli("stop", "chat-1").returncode == 0
    assert gpuservice(api, "chat-1")["spec"]["endpoint"] == "stopped"  # type: ignore[index]
    done = cli("stop", "chat-1", "--workload")
    assert done.returncode == 0, done.stderr
    assert gpuservice(api, "chat-1") is None
    assert one_line_error(cli("stop", "chat-1")) == (
        "nodeau: no workload called 'chat-1' in the cluster; nodeau ps lists them"
    )


def test_run_refused_prints_the_refusal_and_deletes_the_object(
    cli: Cli, api: client.ApiClient
) -> None:
    running = cli.start("run", "big-model", "--name", "big", *UNPROVED)
    wait_for(lambda: gpuservice(api, "big") is not None, "the GPUService is created")
    sentence = "no card in the fleet has 80.00 GiB; the largest has 24.00 GiB"
    write_status(
        api, "big",
        {
            "state": "refused", "sentence": sentence,
            "refusal": {"kind": "capacity", "code": "capacity.no-card-large-enough",
                        "message": sentence},
            "conditions": [condition("Admitted", False, "Capacity", sentence)],
        },
    )  # fmt: skip
    out, err = running.communicate(timeout=120)
    assert running.returncode == 2 and out == ""
    assert err.splitlines()[-1] == f"refused (capacity): capacity.no-card-large-enough: {sentence}"
    assert gpuservice(api, "big") is None
    assert cli("ps").stdout.splitlines()[1:] == []


def test_run_without_a_decision_in_time_says_so_and_leaves_the_object(
    cli: Cli, api: client.ApiClient
) -> None:
    done = cli("run", "qwen-race", "--name", "slow", "--wait", "0.5", *UNPROVED)
    assert done.returncode == 1
    said = done.stderr.splitlines()[-1]
    assert said.startswith("nodeau: the controller did not decide on slow within 0.5 seconds")
    assert gpuservice(api, "slow") is not None
    rows = cli.json("ps")
    assert isinstance(rows, list)
    assert [(row["name"], row["state"], row["sentence"]) for row in rows] == [
        ("slow", "pending", "waiting for the controller's decision")
    ]
    explained = one_line_error(cli("service", "explain", "slow"))
    assert explained == (
        "nodeau: slow has no recorded admission yet: the controller has not decided"
    )


def test_with_the_real_controller_a_model_no_machine_holds_is_refused_and_nothing_is_left(
    cli: Cli, api: client.ApiClient, controller: None
) -> None:
    create_kwok_nodes(api, ["n1"])
    publish_report(
        api,
        MachineReport(
            reading=SimulatedGpuInventory("n1", "1 x 24 GiB").read(), at=datetime.now(UTC)
        ),
    )
    done = cli("run", "no-such-model", "--name", "nothing", "--wait", "60")
    assert done.returncode == 2, done.stderr
    said = done.stderr.splitlines()[-1]
    assert said.startswith("refused (capacity): capacity.")
    wait_for(lambda: gpuservice(api, "nothing") is None, "the refused GPUService is gone")
