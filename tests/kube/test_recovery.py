"""Recovery on a real API server: machines whose kubelet (their own KWOK) and agent go quiet.

A machine goes off the network by SIGSTOP of its KWOK (tests/support/real/kube_lossy.py) and
its report no longer renewed. The controller runs in process, a pass at a time, on the real
clock: unreachable 40 s after the last renewal, moved once its delay has passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.health_store import read_health
from nodeau.adapters.kube.marks import write_drained
from nodeau.adapters.kube.pods import list_pods
from nodeau.adapters.kube.report_form import MachineArtifact
from nodeau.adapters.kube.reports import publish_report
from nodeau.domain.health import Health
from tests.support.real.kube_cluster import Cluster
from tests.support.real.kube_controller import artifact, create, gpu_uuid, ledger, report, status
from tests.support.real.kube_lossy import lossy_machines
from tests.support.real.kube_nodes import kwok_node
from tests.support.real.kube_recovery import SHAS, Fleet, record

DELAY_S = 5
RECOVER = {"recovery": "automatic", "recoveryAfterSeconds": DELAY_S}


def model(machine: str, letter: str) -> MachineArtifact:
    """A verified 4 GiB copy of model ``<letter>model`` on ``machine``."""
    return artifact(machine, SHAS[letter] * 32, f"{letter}model", 4)


def held_for(api: Any, name: str) -> str | None:
    reason = record(api, name).workload.held_reason
    return None if reason is None else reason.value


def state(api: Any, name: str, plural: str = r.GPUSERVICES) -> str:
    return str(status(api, name, plural).get("state"))


def serving(api: Any, *names: str) -> bool:
    return all(state(api, n) == "serving" and status(api, n).get("endpoint") for n in names)


def pods_of(api: Any, workload: str) -> list[tuple[str, str | None]]:
    return [(p.name, p.node) for p in list_pods(api) if p.workload == workload]


def label(api: Any, node: str, labels: dict[str, str]) -> None:
    client.CoreV1Api(api).patch_node(node, {"metadata": {"labels": labels}})


def health(api: Any, machine: str) -> Health:
    return read_health(api)[machine].state


def reserved(api: Any) -> dict[str, str]:
    return {x.workload: x.machine for x in ledger(api)}


def off(fleet: Fleet, machines: dict[str, Any], names: Iterable[str]) -> None:
    for name in names:
        machines[name].off()
        fleet.quiet.add(name)


def test_each_rule_on_three_machines_going_off_the_network(
    fresh_fleet: Any, cluster: Cluster
) -> None:
    """l1 (recovery automatic, never, a batch job), l2 (marked upgrading) and l3 (the
    control-plane machine) go off the network; d's agent alone goes quiet. Only l1's
    automatic service moves, after its delay, never onto drained a, and nothing moves
    back when l1 returns."""
    api = fresh_fleet
    fleet = Fleet(api)
    with lossy_machines(cluster, api, "l1", "l2", "l3") as lossy:
        fleet.machine("l1", 3, model("l1", "x"))
        fleet.machine("l2", 1, model("l2", "y"))
        fleet.machine("l3", 1, model("l3", "z"))
        client.CoreV1Api(api).create_node(kwok_node("d"))
        fleet.machine("d", 1, model("d", "w"))
        create(api, "auto", "xmodel", **RECOVER)
        create(api, "never", "xmodel", recovery="never")
        create(api, "nightly", "xmodel", plural=r.BATCHJOBS)
        create(api, "upg", "ymodel", **RECOVER)
        create(api, "cp", "zmodel", **RECOVER)
        create(api, "deg", "wmodel", **RECOVER)
        fleet.until(lambda: serving(api, "auto", "never", "upg", "cp", "deg"), "all serving")
        fleet.until(lambda: state(api, "nightly", r.BATCHJOBS) == "running", "nightly running")
        first_uid = client.CoreV1Api(api).read_namespaced_pod("service-auto", r.NAMESPACE)
        assert first_uid.spec.node_name == "l1"

        # the machines it could move to: a (drained; the first by name), c and e
        for name in ("a", "c", "e"):
            client.CoreV1Api(api).create_node(kwok_node(name))
            fleet.machine(name, 2, model(name, "x"), model(name, "y"), model(name, "z"))
        write_drained(api, "a", datetime.now(UTC))
        label(api, "l2", {r.UPGRADING_LABEL: "true"})
        label(api, "l3", {r.CONTROL_PLANE_LABEL: ""})
        fleet.step()

        off(fleet, lossy, ("l1", "l2", "l3"))
        fleet.quiet.add("d")  # d's agent alone stops: its kubelet still answers
        fleet.until(lambda: health(api, "l1") is Health.UNREACHABLE, "l1 unreachable", 90)
        since = read_health(api)["l1"].since
        assert since is not None
        assert lossy["l1"].off_since is not None
        # noticed once both signals had been quiet for their grace (40 s for the node)
        assert since - lossy["l1"].off_since <= timedelta(seconds=45)
        assert (state(api, "auto"), held_for(api, "auto")) == ("held", "waiting-for-delay")
        assert status(api, "auto")["endpoint"] == ""  # fenced from the moment it is unreachable

        fleet.until(lambda: record(api, "auto").workload.machine != "l1", "auto moved", 60)
        moved = record(api, "auto").workload
        assert moved.last_recovery is not None
        assert moved.last_recovery.at >= since + timedelta(seconds=DELAY_S)  # not before
        assert moved.last_recovery.at - (since + timedelta(seconds=DELAY_S)) < timedelta(
            seconds=5
        )  # and decided on the first passes after it
        assert moved.machine == "c"  # a is drained, l1..l3 are unreachable or upgrading
        assert reserved(api)["auto"] == "c"
        fleet.until(lambda: serving(api, "auto"), "auto serving on c", 60)
        assert pods_of(api, "auto") == [("service-auto", "c")]  # exactly one instance
        assert status(api, "auto")["endpoint"]

        # everything else waits where it is, each with its reason
        assert held_for(api, "never") == "machine-unreachable-recovery-off"
        batch = record(api, "nightly", r.BATCHJOBS).workload
        assert (batch.machine, batch.held_reason and batch.held_reason.value) == ("l1", "batch-job")
        assert health(api, "l2") is Health.UPGRADING
        assert (record(api, "upg").workload.machine, state(api, "upg")) == ("l2", "serving")
        assert held_for(api, "cp") == "on-control-plane-machine"
        assert health(api, "d") is Health.DEGRADED
        assert (record(api, "deg").workload.machine, state(api, "deg")) == ("d", "serving")
        assert reserved(api) == {
            "auto": "c", "never": "l1", "nightly": "l1", "upg": "l2", "cp": "l3", "deg": "d",
        }  # fmt: skip

        # l1 comes back: nothing moves back; what waited for it resumes there
        lossy["l1"].on()
        fleet.quiet.discard("l1")
        fleet.until(lambda: serving(api, "never"), "never serving again on l1", 90)
        fleet.passes(5)
        assert record(api, "auto").workload.machine == "c"
        assert pods_of(api, "auto") == [("service-auto", "c")]
        assert record(api, "auto").workload.recoveries == 1


def test_nowhere_to_go_is_held_without_writes_until_a_card_frees(
    fresh_fleet: Any, cluster: Cluster
) -> None:
    """A free card but no copy of the model: held for its files, naming the machine that
    could run it. Every card taken: held for capacity, and a minute of being held writes
    nothing to the API. A card with a copy frees: it moves there."""
    api = fresh_fleet
    fleet = Fleet(api)
    with lossy_machines(cluster, api, "l1") as lossy:
        fleet.machine("l1", 1, model("l1", "x"))
        for name in ("c", "e"):
            client.CoreV1Api(api).create_node(kwok_node(name))
        fleet.machine("c", 1, model("c", "f"))
        fleet.machine("e", 1, model("e", "g"))
        create(api, "auto", "xmodel", **RECOVER)
        create(api, "fill", "fmodel")
        fleet.until(lambda: serving(api, "auto", "fill"), "auto and fill serving")
        assert reserved(api) == {"auto": "l1", "fill": "c"}

        off(fleet, lossy, ("l1",))
        fleet.until(lambda: held_for(api, "auto") == "model-files", "held for its files", 120)
        held = status(api, "auto")["sentence"]
        assert "no other machine has a verified copy" in held
        assert "fetches a verified copy" in held

        create(api, "fill2", "gmodel")  # e's only card is taken
        fleet.until(lambda: held_for(api, "auto") == "capacity", "held for capacity", 60)
        assert "it starts when one frees (no retries)" in status(api, "auto")["sentence"]
        fleet.reports["c"] = report("c", 1, model("c", "f"), model("c", "x"))  # c has it too
        publish_report(api, fleet.reports["c"])
        fleet.passes(3)
        assert held_for(api, "auto") == "capacity"

        before = controller_writes(api)
        fleet.passes(60)  # a minute of being held
        assert controller_writes(api) == before

        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, "fill"
        )
        fleet.until(lambda: reserved(api).get("auto") == "c", "auto moved to c's card", 60)
        assert reserved(api) == {"auto": "c", "fill2": "e"}
        fleet.until(lambda: serving(api, "auto"), "auto serving on c", 60)
        assert record(api, "auto").workload.gpu_uuid == gpu_uuid("c", 0)


def test_a_machine_back_before_the_delay_and_a_flapping_one_move_nothing(
    fresh_fleet: Any, cluster: Cluster
) -> None:
    api = fresh_fleet
    fleet = Fleet(api)
    with lossy_machines(cluster, api, "l1") as lossy:
        fleet.machine("l1", 1, model("l1", "x"))
        create(api, "auto", "xmodel", recovery="automatic", recoveryAfterSeconds=20)
        fleet.until(lambda: serving(api, "auto"), "auto serving")
        client.CoreV1Api(api).create_node(kwok_node("c"))  # where it could go
        fleet.machine("c", 1, model("c", "x"))
        assert reserved(api) == {"auto": "l1"}
        spells = []
        for _ in range(2):  # unreachable for about 10 s of a 20 s delay, then back
            off(fleet, lossy, ("l1",))
            fleet.until(lambda: health(api, "l1") is Health.UNREACHABLE, "l1 unreachable", 90)
            spells.append(read_health(api)["l1"].since)
            fleet.passes(10)
            lossy["l1"].on()
            fleet.quiet.discard("l1")
            fleet.until(lambda: health(api, "l1") is Health.REPORTING, "l1 reporting", 30)
        assert spells[0] != spells[1]  # the unreachable moment restarts with each spell
        fleet.until(lambda: serving(api, "auto"), "auto serving again on l1", 60)
        assert reserved(api) == {"auto": "l1"}
        assert record(api, "auto").workload.recoveries == 0


def controller_writes(api: Any) -> tuple[Any, ...]:
    """Everything the controller writes, by resourceVersion: workload objects, the ledger
    and health ConfigMaps, model-server Pods, Events."""
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    objects = tuple(
        (item["metadata"]["name"], item["metadata"]["resourceVersion"])
        for plural in (r.GPUSERVICES, r.BATCHJOBS)
        for item in custom.list_namespaced_custom_object(r.GROUP, r.VERSION, r.NAMESPACE, plural)[
            "items"
        ]
    )
    config_maps = tuple(
        (c.metadata.name, c.metadata.resource_version)
        for c in core.list_namespaced_config_map(r.NAMESPACE).items
    )
    pods = tuple(
        (p.metadata.name, p.metadata.resource_version)
        for p in core.list_namespaced_pod(r.NAMESPACE).items
        if p.spec.node_name != "l1"  # the quiet machine's Pod: its status is not ours
    )
    events = len(core.list_namespaced_event(r.NAMESPACE).items)
    return objects, config_maps, pods, events
