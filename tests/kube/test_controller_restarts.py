"""A model server's container restarted by its kubelet, as the controller and ``ps`` show it.

On a real API server the test writes the kubelet's status after a crash; ``nodeau logs`` on a
KWOK machine is the one line saying there is no kubelet. The first tests need no cluster.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.container_ends import announced_backoff, container_exit
from nodeau.domain.workloads import ServerExit
from tests.support.real.cli import Cli
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import (
    add_machine,
    controller,
    create,
    get,
    gpu_uuid,
    ledger,
    settle,
    small,
    status,
)
from tests.support.real.kube_nodes import READINESS, stamp, wait_for

AT = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("code", "signal", "reason", "expected"),
    [
        (137, None, "Error", ServerExit.killed(9, "SIGKILL", AT)),
        (137, None, "OOMKilled", ServerExit.killed(9, "OOMKilled", AT)),
        (143, None, "Error", ServerExit.killed(15, "SIGTERM", AT)),
        (139, None, "Error", ServerExit.killed(11, "SIGSEGV", AT)),
        (0, 6, "Error", ServerExit.killed(6, "SIGABRT", AT)),
        (1, None, "Error", ServerExit.exited(1, AT)),
        (0, None, "Completed", ServerExit.exited(0, AT)),
        (128, None, "Error", ServerExit.exited(128, AT)),
        (255, None, "Error", ServerExit.exited(255, AT)),
        (162, None, "Error", ServerExit.killed(34, None, AT)),
    ],
)
def test_a_terminated_containers_exit_code_and_reason_say_how_it_ended(
    code: int, signal: int | None, reason: str, expected: ServerExit
) -> None:
    assert container_exit(code, signal, reason, AT) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("back-off 10s restarting failed container=server pod=service-chat_ns(uid)", 10),
        ("back-off 1m20s restarting failed container=server pod=p", 80),
        ("back-off 5m0s restarting failed container=server pod=p", 300),
        ("back-off 500ms restarting failed container=server pod=p", 0.5),
        ("restarting failed container=server pod=p", None),
        ("", None),
        (None, None),
    ],
)
def test_the_kubelets_back_off_is_read_from_its_message(
    message: str | None, expected: float | None
) -> None:
    wait = None if expected is None else timedelta(seconds=expected)
    assert announced_backoff(message) == wait


# -- on the API server


def hhmmss(at: datetime) -> str:
    return at.strftime("%H:%M:%S")


# KWOK only makes a Pod Running and Ready: its stages match a Pending Pod (or a Job's), so it
# leaves a Running Pod's status alone, and the test writes what a kubelet writes after a crash.
def kubelet_writes(
    api: client.ApiClient,
    *,
    restarts: int,
    state: dict[str, Any],
    last: dict[str, Any] | None = None,
    ready: bool = False,
) -> None:
    """Replace Pod service-chat's status as its kubelet would: the server container's
    restart count, state and last state, and the readiness conditions."""
    core: Any = client.CoreV1Api(api)
    body = api.sanitize_for_serialization(core.read_namespaced_pod("service-chat", r.NAMESPACE))
    assert body["status"]["phase"] == "Running"
    now, flag = stamp(datetime.now(UTC)), "True" if ready else "False"
    kept = [c for c in body["status"]["conditions"] if c["type"] not in READINESS]
    body["status"]["conditions"] = kept + [
        {"type": t, "status": flag, "lastTransitionTime": now} for t in READINESS
    ]
    body["status"]["containerStatuses"] = [
        {
            "name": "server",
            "image": r.SERVER_IMAGE,
            "imageID": "",
            "ready": ready,
            "restartCount": restarts,
            "state": state,
            "lastState": {"terminated": last} if last else {},
        }
    ]
    core.replace_namespaced_pod_status("service-chat", r.NAMESPACE, body)


def ended(code: int, reason: str, started: datetime, finished: datetime) -> dict[str, Any]:
    return {
        "exitCode": code,
        "reason": reason,
        "startedAt": stamp(started),
        "finishedAt": stamp(finished),
        "containerID": "containerd://0123",
    }


def crash_loop(wait: str) -> dict[str, Any]:
    message = f"back-off {wait} restarting failed container=server pod=service-chat_{r.NAMESPACE}"
    return {"waiting": {"reason": "CrashLoopBackOff", "message": message}}


def ps_row(cli: Cli) -> dict[str, Any]:
    rows = cli.json("ps")
    assert isinstance(rows, list)
    (row,) = [row for row in rows if row["name"] == "chat"]
    assert isinstance(row, dict)
    return row


def says(row: dict[str, Any], state: str, since: datetime, rest: str) -> None:
    """The row is in ``state``, its sentence that state since ``since`` (any age), then
    ``rest`` word for word."""
    where = f"{state} on m1 ({gpu_uuid('m1', 0)[:8]}…) since {hhmmss(since)} "
    assert row["state"] == state
    assert re.fullmatch(re.escape(where) + r"\(\d+[sm]\)" + re.escape(rest), row["sentence"]), row[
        "sentence"
    ]


def test_a_pods_restarts_as_its_kubelet_records_them_make_the_service_restarting_then_serving(
    cluster: Cluster, fresh_fleet: client.ApiClient, tmp_path: Path
) -> None:
    """KWOK runs no container: the test writes the Pod's container status as a kubelet
    does when the model server is killed and restarted; the controller reads it and
    ``nodeau ps`` says it."""
    api = fresh_fleet
    cli = Cli(
        tmp_path / "home",
        timeout_s=120,
        NODEAU_PLANE="kubernetes",
        KUBECONFIG=str(cluster.kubeconfig),
    )
    add_machine(api, "m1", 1, small("m1"))
    create(api, "chat", "qwen")
    ctl = controller(api)
    settle(ctl, lambda: status(api, "chat").get("state") == "serving", "chat serving")
    endpoint = status(api, "chat")["endpoint"]
    assert endpoint and ps_row(cli)["endpoint"] == endpoint
    card = [(x.workload, x.gpu_uuid) for x in ledger(api)]
    assert card == [("chat", gpu_uuid("m1", 0))]
    up_at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)

    # killed (exit code 137): the container's state is terminated, not restarted yet
    first = datetime.now(UTC).replace(microsecond=0)
    kubelet_writes(api, restarts=0, state={"terminated": ended(137, "Error", up_at, first)})
    settle(ctl, lambda: status(api, "chat").get("state") == "restarting", "chat restarting")
    row = ps_row(cli)
    says(
        row,
        "restarting",
        first,
        f": its model server was killed by signal 9 (SIGKILL) at {hhmmss(first)}; "
        f"restart 1, next attempt at {hhmmss(first + timedelta(seconds=10))}",
    )
    assert row["endpoint"] is None and status(api, "chat")["endpoint"] == ""
    assert [(x.workload, x.gpu_uuid) for x in ledger(api)] == card

    # nothing changed: the controller writes nothing
    version = get(api, "chat")["metadata"]["resourceVersion"]  # type: ignore[index]
    ctl.resync()
    ctl.resync()
    assert get(api, "chat")["metadata"]["resourceVersion"] == version  # type: ignore[index]

    # its restart was killed for memory; the kubelet backs off 10 s
    second = first + timedelta(seconds=1)
    oom = ended(137, "OOMKilled", first, second)
    kubelet_writes(api, restarts=1, state=crash_loop("10s"), last=oom)
    settle(ctl, lambda: "OOMKilled" in status(api, "chat")["sentence"], "chat out of memory")
    says(
        ps_row(cli),
        "restarting",
        first,
        f": its model server was killed by signal 9 (OOMKilled) while starting at "
        f"{hhmmss(second)}; restart 2, next attempt at {hhmmss(second + timedelta(seconds=10))}"
        " (nodeau logs chat shows its log)",
    )

    # the next one exited with code 1; the kubelet backs off 20 s
    third = second + timedelta(seconds=2)
    failed = ended(1, "Error", second, third)
    kubelet_writes(api, restarts=2, state=crash_loop("20s"), last=failed)
    settle(ctl, lambda: "code 1" in status(api, "chat")["sentence"], "chat exited 1")
    says(
        ps_row(cli),
        "restarting",
        first,
        f": its model server exited with code 1 while starting at {hhmmss(third)}; "
        f"restart 3, next attempt at {hhmmss(third + timedelta(seconds=20))}"
        " (nodeau logs chat shows its log)",
    )
    assert [(x.workload, x.gpu_uuid) for x in ledger(api)] == card

    # KWOK has no kubelet to give the log: one line, naming the Pod and the machine
    logs = cli("logs", "chat", "--lines", "5")
    assert logs.returncode == 1 and "Traceback" not in logs.stderr
    line = logs.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "nodeau: cannot read the log of chat's model server (Pod service-chat on m1): the API "
        "server could not get it from m1's kubelet ("
    ), logs.stderr
    assert "containerLogs/nodeau-system/service-chat/server?previous=true" in line

    # restarted and Ready again: serving, its restarts kept
    restarted = third + timedelta(seconds=20)
    kubelet_writes(
        api, restarts=3, state={"running": {"startedAt": stamp(restarted)}}, last=failed, ready=True
    )
    settle(ctl, lambda: status(api, "chat").get("state") == "serving", "chat serving again")
    row = ps_row(cli)
    assert row["endpoint"] == endpoint
    serving_since = datetime.fromisoformat(row["since"])
    says(
        row,
        "serving",
        serving_since,
        f", restarted 3 times, last after its model server exited with code 1 while starting "
        f"at {hhmmss(third)}; nothing to do",
    )
    assert [(x.workload, x.gpu_uuid) for x in ledger(api)] == card
    version = get(api, "chat")["metadata"]["resourceVersion"]  # type: ignore[index]
    ctl.resync()
    assert get(api, "chat")["metadata"]["resourceVersion"] == version  # type: ignore[index]

    # KWOK left the status a kubelet would have written as it was
    def kept() -> bool:
        pod = client.CoreV1Api(api).read_namespaced_pod("service-chat", r.NAMESPACE)
        return pod.status.container_statuses[0].restart_count == 3

    wait_for(kept, "the Pod keeps its restart count")
