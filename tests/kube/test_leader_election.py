"""Leader election between real controller processes on a real API server (docs/adr/0015).

One leads and only it writes; a killed leader's standby takes over (bench/failover.py measures
it); a paused leader that resumes begins no write. Who wrote what is read from what the API
server records: field managers, Events' ``reportingInstance``, ``status.decidedBy``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.lease import field_manager
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import add_machine, create, holder, lease_of, small, status
from tests.support.real.kube_nodes import wait_for

MACHINES = {"m1": 3, "m2": 3}  # room for every service these tests ask for
LISTS = (
    f"/apis/{r.GROUP}/{r.VERSION}/namespaces/{r.NAMESPACE}/{r.GPUSERVICES}",
    f"/apis/{r.GROUP}/{r.VERSION}/namespaces/{r.NAMESPACE}/{r.BATCHJOBS}",
    f"/api/v1/namespaces/{r.NAMESPACE}/pods",
    f"/api/v1/namespaces/{r.NAMESPACE}/configmaps",
    f"/api/v1/namespaces/{r.NAMESPACE}/events",
    f"/apis/coordination.k8s.io/v1/namespaces/{r.NAMESPACE}/leases",
)


def start_controller(cluster: Cluster, identity: str, log: Path) -> subprocess.Popen[bytes]:
    """One controller process with the default lease terms (12 s lease, 7 s renew deadline)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "nodeau.apps.controller", "--kubeconfig",
             str(cluster.kubeconfig), "--identity", identity, "--resync", "2"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def everything(cluster: Cluster) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object in nodeau-system a controller may write, as plain JSON, with its
    resource (``pods``...)."""
    with cluster.http() as http:
        for path in LISTS:
            answer = http.get(path)
            answer.raise_for_status()
            for item in answer.json()["items"]:
                yield path.rsplit("/", 1)[1], item


def writes_by(cluster: Cluster, identity: str) -> dict[str, set[str]]:
    """What the API server records of ``identity``'s writes: its field-manager entries (each
    with the server's time of its last write), its Events, its decisions."""
    manager = field_manager(identity)
    found: dict[str, set[str]] = {"managed": set(), "events": set(), "decided": set()}
    for resource, item in everything(cluster):
        meta = item["metadata"]
        for entry in meta.get("managedFields") or ():
            if entry.get("manager") == manager:
                sub = entry.get("subresource", "")
                found["managed"].add(f"{resource}/{meta['name']}/{sub}@{entry['time']}")
        if item.get("reportingInstance") == identity:
            found["events"].add(meta["name"])
        if (item.get("status") or {}).get("decidedBy") == identity:
            found["decided"].add(meta["name"])
    return found


def written_after(writes: set[str], moment: datetime) -> set[str]:
    """The field-manager entries whose server time (to the second) is after ``moment``."""
    since = moment.replace(microsecond=0)
    return {w for w in writes if datetime.fromisoformat(w.rsplit("@", 1)[1]) > since}


def said_late(log: str, write: str) -> bool:
    """Whether the controller's ``log`` said that ``write`` (an entry of ``writes_by``) was
    sent while it led and may have landed after: the PUT or PATCH names the object, the
    POST that made it names its collection."""
    resource, name, sub = write.rsplit("@", 1)[0].split("/")
    lines = [line for line in log.splitlines() if "may have landed after" in line]
    own = f"/{resource}/{name}" + (f"/{sub}" if sub else "")
    made = f"/{resource},"
    return any(f"{own}," in line or ("POST " in line and made in line) for line in lines)


def decided(api: Any, name: str) -> bool:
    return bool(status(api, name).get("decidedBy"))


def serving(api: Any, name: str) -> bool:
    return status(api, name).get("state") == "serving"


def stop_all(processes: list[subprocess.Popen[bytes]]) -> list[int]:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    return [process.wait(timeout=30) for process in processes]


@pytest.fixture
def fleet(fresh_fleet: Any) -> Any:
    for machine, cards in MACHINES.items():
        add_machine(fresh_fleet, machine, cards, small(machine))
    return fresh_fleet


@pytest.fixture
def pair(cluster: Cluster, fleet: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two controllers, c1 and c2, once one of them leads: ``leader``, ``standby``, their
    processes and logs."""
    processes = {i: start_controller(cluster, i, tmp_path / f"{i}.log") for i in ("c1", "c2")}
    try:
        wait_for(lambda: holder(fleet) in processes, "a controller takes the Lease", 30)
        leader = holder(fleet)
        assert leader is not None
        standby = "c2" if leader == "c1" else "c1"
        yield {"leader": leader, "standby": standby, "processes": processes, "logs": tmp_path}
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
        stop_all(list(processes.values()))


def log_of(pair: dict[str, Any], identity: str) -> str:
    return str((pair["logs"] / f"{identity}.log").read_text())


def test_exactly_one_controller_leads_and_only_it_writes(
    cluster: Cluster, fleet: Any, pair: dict[str, Any]
) -> None:
    leader, standby = pair["leader"], pair["standby"]
    for name in ("chat-a", "chat-b"):
        create(fleet, name, "qwen")
    wait_for(lambda: all(serving(fleet, n) for n in ("chat-a", "chat-b")), "both serving", 60)
    lease = lease_of(fleet)
    assert lease.spec.holder_identity == leader
    assert lease.spec.lease_duration_seconds == 12
    assert lease.spec.acquire_time is not None and lease.spec.renew_time is not None
    assert lease.spec.lease_transitions == 0
    assert {status(fleet, n)["decidedBy"] for n in ("chat-a", "chat-b")} == {leader}
    mine = writes_by(cluster, leader)
    assert {"chat-a", "chat-b"} <= mine["decided"]
    assert mine["events"]  # its Events name it
    assert any(w.startswith("gpuservices/chat-a/status@") for w in mine["managed"])
    assert any(w.startswith("pods/") for w in mine["managed"])
    assert writes_by(cluster, standby) == {"managed": set(), "events": set(), "decided": set()}
    wait_for(  # it may have said "(no one leads)" before the leader took the Lease
        lambda: f"controller {standby} stands by ({leader} leads)" in log_of(pair, standby),
        "the standby names the leader", 30,
    )  # fmt: skip


def test_a_killed_leaders_standby_takes_over_and_decides(
    cluster: Cluster, fleet: Any, pair: dict[str, Any]
) -> None:
    leader, standby = pair["leader"], pair["standby"]
    create(fleet, "before", "qwen")
    wait_for(lambda: decided(fleet, "before"), "decided by the leader", 60)
    pair["processes"][leader].send_signal(signal.SIGKILL)
    pair["processes"][leader].wait(timeout=10)
    last = lease_of(fleet).spec  # the dead leader's last renewal
    assert last.holder_identity == leader
    create(fleet, "after", "qwen")
    wait_for(lambda: holder(fleet) == standby, "the standby takes the Lease", 60)
    wait_for(lambda: decided(fleet, "after"), "decided by the new leader", 60)
    assert status(fleet, "after")["decidedBy"] == standby
    assert status(fleet, "before")["decidedBy"] == leader
    taken = lease_of(fleet).spec
    assert taken.lease_transitions == last.lease_transitions + 1
    failover = (taken.acquire_time - last.renew_time).total_seconds()
    print(f"failover: {failover:.2f} s from {leader}'s last renewal to {standby}'s acquisition")


def test_a_paused_leader_writes_nothing_after_it_lost_the_lease(
    cluster: Cluster, fleet: Any, pair: dict[str, Any]
) -> None:
    leader, standby = pair["leader"], pair["standby"]
    old = pair["processes"][leader]
    create(fleet, "early", "qwen")
    wait_for(lambda: serving(fleet, "early"), "serving", 60)
    os.kill(old.pid, signal.SIGSTOP)
    stopped_at = datetime.now(UTC)
    wait_for(lambda: holder(fleet) == standby, "the standby takes the Lease", 60)
    before = writes_by(cluster, leader)
    assert before["decided"] == {"early"}  # what it wrote while it led is recorded
    os.kill(old.pid, signal.SIGCONT)
    names = [f"late-{i}" for i in range(4)]
    for name in names:
        create(fleet, name, "qwen")
    wait_for(lambda: all(decided(fleet, n) for n in names), "every late one decided", 60)
    wait_for(
        lambda: f"controller {leader} no longer leads: standing by" in log_of(pair, leader),
        "the resumed controller stands by", 60,
    )  # fmt: skip
    wait_for(
        lambda: f"controller {leader} stands by ({standby} leads)" in log_of(pair, leader),
        "the resumed controller sees who leads", 60,
    )  # fmt: skip
    for name in names:  # a few resyncs of the resumed one have passed meanwhile
        assert status(fleet, name)["decidedBy"] == standby
    after = writes_by(cluster, leader)
    assert after["decided"] == before["decided"]
    late = written_after(after["managed"], stopped_at)
    log = log_of(pair, leader)
    # a write that passed the fence just before the pause may land after it (ADR 0015,
    # "The remaining window"); the controller says so of each, and begins none
    assert all(said_late(log, write) for write in late), (late, log)
    new_events = after["events"] - before["events"]
    assert not new_events or any(
        "/events," in line for line in log.splitlines() if "may have landed after" in line
    ), (new_events, log)
    assert any(w.startswith("gpuservices/late-0/status@") for w in
               writes_by(cluster, standby)["managed"])  # fmt: skip
    assert old.poll() is None  # still running, as a standby
    assert holder(fleet) == standby
    codes = stop_all(list(pair["processes"].values()))
    assert codes == [0, 0], [log_of(pair, i) for i in ("c1", "c2")]
