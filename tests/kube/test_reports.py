"""Machine reports on a real API server: the agent Lease, its report, and the health signals."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.kube import reports
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.report_form import MachineArtifact, MachineReport
from nodeau.adapters.kube.reports import (
    ReportConflict,
    publish_report,
    read_report_set,
    read_reports,
    read_signals,
)
from nodeau.adapters.simulated_inventory import SimulatedGpuInventory
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading, merge_reports
from nodeau.domain.health import Health, HealthPolicy, Signal, assess
from nodeau.domain.memory import GIB, Architecture
from tests.support.builders.summaries import tiny_summary
from tests.support.real.kube_nodes import create_kwok_nodes, kwok_node, node_lease_renewed, wait_for

AT = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
SHA = "ab" * 32

TINY = Architecture(
    name="llama", n_layers=2, n_embd=64, n_head=4, n_head_kv=2, key_length=16,
    value_length=16, n_vocab=355, n_ff=128, context_length=256,
)  # fmt: skip
SUMMARY = tiny_summary(name="tiny", file_type="F32", quantisation="F32", tensor_bytes=4096)


def real_reading(machine: str, *uuids: str) -> MachineReading:
    return MachineReading(
        machine=machine,
        gpus=tuple(
            GpuReading(
                gpu=Gpu(uuid=u, model="NVIDIA H100 80GB HBM3", total_bytes=80 * GIB),
                free_bytes=79 * GIB,
                driver_version="570.86.15",
            )
            for u in uuids
        ),
        simulated=False,
        note="",
    )


def simulated_report(machine: str, at: datetime = AT) -> MachineReport:
    artifact = MachineArtifact(
        id=SHA, names=("tiny-chat", "mine"), size_bytes=123_456,
        path=f"/var/lib/nodeau/models/blobs/sha256/{SHA}", summary=SUMMARY,
    )  # fmt: skip
    return MachineReport(
        reading=SimulatedGpuInventory(machine, "2 x 24 GiB").read(), at=at, artifacts=(artifact,)
    )


def lease(api: client.ApiClient, machine: str) -> Any:
    return client.CoordinationV1Api(api).read_namespaced_lease(
        r.agent_lease_name(machine), r.NAMESPACE
    )


def put_lease(api: client.ApiClient, name: str, annotations: dict[str, str]) -> None:
    leases: Any = client.CoordinationV1Api(api)  # plain dict bodies
    leases.create_namespaced_lease(
        r.NAMESPACE,
        {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"holderIdentity": name, "renewTime": reports.micro_time(AT)},
        },
    )


def test_two_machines_reports_round_trip_through_their_leases(
    fresh_fleet: client.ApiClient,
) -> None:
    garage = simulated_report("garage")
    attic = MachineReport(reading=real_reading("attic", "GPU-1111", "GPU-2222"), at=AT)
    publish_report(fresh_fleet, garage)
    publish_report(fresh_fleet, attic)

    assert read_reports(fresh_fleet) == (attic, garage)
    held = lease(fresh_fleet, "garage")
    assert held.spec.holder_identity == "garage"
    assert held.spec.lease_duration_seconds == r.AGENT_LEASE_SECONDS
    assert held.spec.renew_time == AT  # MicroTime keeps the microseconds
    assert held.spec.acquire_time == AT
    assert held.metadata.labels == {r.MACHINE_LABEL: "garage"}
    plain = json.loads(held.metadata.annotations[r.REPORT_ANNOTATION])
    assert plain["machine"] == "garage" and plain["simulated"] is True
    assert [g["driver_version"] for g in plain["gpus"]] == ["simulated", "simulated"]
    assert plain["artifacts"][0]["id"] == SHA
    assert plain["artifacts"][0]["summary"]["architecture"]["n_vocab"] == 355
    [back] = [rep for rep in read_reports(fresh_fleet) if rep.machine == "garage"]
    assert all(g.gpu.simulated for g in back.reading.gpus)
    assert not any(g.gpu.simulated for rep in read_reports(fresh_fleet)
                   if rep.machine == "attic" for g in rep.reading.gpus)  # fmt: skip


def test_a_newer_report_replaces_the_lease_and_a_moved_card_goes_to_the_newest(
    fresh_fleet: client.ApiClient,
) -> None:
    publish_report(fresh_fleet, MachineReport(reading=real_reading("a", "GPU-1", "GPU-2"), at=AT))
    later = AT + timedelta(seconds=10)
    publish_report(fresh_fleet, MachineReport(reading=real_reading("a", "GPU-1"), at=later))
    # GPU-2 moved: machine b reports it after a's newest report
    publish_report(
        fresh_fleet,
        MachineReport(reading=real_reading("b", "GPU-2"), at=later + timedelta(seconds=1)),
    )

    found = {rep.machine: rep for rep in read_reports(fresh_fleet)}
    assert found["a"].at == later
    assert [g.gpu.uuid for g in found["a"].reading.gpus] == ["GPU-1"]
    held = lease(fresh_fleet, "a")
    assert (held.spec.acquire_time, held.spec.renew_time) == (AT, later)
    fleet = merge_reports(rep.as_agent_report() for rep in found.values())
    located = fleet.locate("GPU-2")
    assert located is not None and located[0].name == "b"


def test_missing_or_unreadable_reports_are_skipped_and_named(
    fresh_fleet: client.ApiClient,
) -> None:
    good = simulated_report("good")
    publish_report(fresh_fleet, good)
    put_lease(fresh_fleet, r.agent_lease_name("silent"), {})
    put_lease(fresh_fleet, r.agent_lease_name("garbled"), {r.REPORT_ANNOTATION: "{not json"})
    impostor = reports.report_json(simulated_report("someone-else"))
    put_lease(fresh_fleet, r.agent_lease_name("impostor"), {r.REPORT_ANNOTATION: impostor})
    extra = json.loads(reports.report_json(simulated_report("extra")))
    extra["gpus"][0]["colour"] = "green"
    put_lease(fresh_fleet, r.agent_lease_name("extra"), {r.REPORT_ANNOTATION: json.dumps(extra)})
    put_lease(fresh_fleet, "not-an-agent", {})  # another Lease in the namespace: not a report

    found = read_report_set(fresh_fleet)
    assert found.reports == (good,)
    assert read_reports(fresh_fleet) == (good,)
    assert len(found.problems) == 4
    by_lease = {p.split()[4]: p for p in found.problems}
    assert set(by_lease) == {f"{r.NAMESPACE}/{r.AGENT_LEASE_PREFIX}{m}"
                             for m in ("silent", "garbled", "impostor", "extra")}  # fmt: skip
    assert "is missing" in by_lease[f"{r.NAMESPACE}/{r.agent_lease_name('silent')}"]
    assert "is not JSON" in by_lease[f"{r.NAMESPACE}/{r.agent_lease_name('garbled')}"]
    assert "'someone-else'" in by_lease[f"{r.NAMESPACE}/{r.agent_lease_name('impostor')}"]
    assert "colour" in by_lease[f"{r.NAMESPACE}/{r.agent_lease_name('extra')}"]
    assert all("\n" not in p for p in found.problems)


def competing_replace(
    monkeypatch: pytest.MonkeyPatch, api: client.ApiClient, times: int
) -> list[int]:
    """Make another writer change the Lease just before each of the next ``times`` replaces."""
    original = reports.send_json
    outcomes: list[int] = []

    def send(
        api_: Any, method: str, path: str, params: dict[str, str], body: dict[str, Any]
    ) -> dict[str, Any]:
        if method != "PUT":
            return original(api_, method, path, params, body)
        if len(outcomes) < times:
            leases: Any = client.CoordinationV1Api(api)
            other = leases.read_namespaced_lease(params["name"], params["namespace"])
            other.metadata.annotations = {
                **(other.metadata.annotations or {}),
                "example.com/other-writer": str(len(outcomes)),
            }
            leases.replace_namespaced_lease(params["name"], params["namespace"], other)
        try:
            result = original(api_, method, path, params, body)
        except ApiException as exc:
            outcomes.append(exc.status)
            raise
        outcomes.append(200)
        return result

    monkeypatch.setattr(reports, "send_json", send)
    return outcomes


def test_a_conflicting_write_is_read_again_and_retried(
    fresh_fleet: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_report(fresh_fleet, simulated_report("garage"))
    outcomes = competing_replace(monkeypatch, fresh_fleet, times=2)
    newer = simulated_report("garage", AT + timedelta(seconds=10))
    publish_report(fresh_fleet, newer)

    assert outcomes == [409, 409, 200]
    assert read_reports(fresh_fleet) == (newer,)
    held = lease(fresh_fleet, "garage")
    assert held.metadata.annotations["example.com/other-writer"] == "1"  # the other's mark kept


def test_a_lease_that_never_stops_changing_is_a_conflict_after_bounded_tries(
    fresh_fleet: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_report(fresh_fleet, simulated_report("garage"))
    outcomes = competing_replace(monkeypatch, fresh_fleet, times=1000)
    with pytest.raises(ReportConflict, match="nodeau-agent-garage"):
        publish_report(fresh_fleet, simulated_report("garage", AT + timedelta(seconds=10)))
    assert outcomes == [409] * reports.PUBLISH_TRIES
    assert read_reports(fresh_fleet) == (simulated_report("garage"),)


def test_signals_come_from_the_node_lease_the_agent_lease_and_the_upgrade_mark(
    fresh_fleet: client.ApiClient,
) -> None:
    create_kwok_nodes(fresh_fleet, ["garage"])
    core: Any = client.CoreV1Api(fresh_fleet)  # plain dict bodies
    core.create_node(kwok_node("attic", labels={r.UPGRADING_LABEL: "true"}))
    core.create_node({"metadata": {"name": "cellar"}})  # no kubelet renews its Lease
    wait_for(lambda: all(node_lease_renewed(fresh_fleet, n) for n in ("garage", "attic")),
             "the node Leases of garage and attic")  # fmt: skip

    before = read_signals(fresh_fleet)
    assert set(before) == {"garage", "attic", "cellar"}
    assert before["garage"].node_heartbeat_at is not None
    assert before["garage"].agent_report_at is None
    assert before["cellar"].node_heartbeat_at is None
    assert (before["attic"].upgrading, before["garage"].upgrading) == (True, False)
    now = datetime.now(UTC)
    silent = assess(before["garage"], now)
    assert (silent.state, silent.quiet) == (Health.DEGRADED, frozenset({Signal.AGENT_REPORT}))
    assert assess(before["attic"], now).state is Health.UPGRADING
    assert assess(before["cellar"], now).state is Health.UNREACHABLE

    publish_report(fresh_fleet, simulated_report("garage", now))
    publish_report(fresh_fleet, simulated_report("cellar", now))
    after = read_signals(fresh_fleet)
    assert after["garage"].agent_report_at == now
    assert after["cellar"].agent_report_at == now
    assert assess(after["garage"], datetime.now(UTC)).state is Health.REPORTING
    cellar = assess(after["cellar"], datetime.now(UTC))
    assert (cellar.state, cellar.quiet) == (Health.DEGRADED, frozenset({Signal.NODE_HEARTBEAT}))
    # the agent's report stays the last one seen: a short grace later, it is the quiet signal
    short = HealthPolicy(agent_grace=timedelta(seconds=5))
    late = assess(after["garage"], now + timedelta(seconds=5), short)
    assert late.quiet == frozenset({Signal.AGENT_REPORT})
