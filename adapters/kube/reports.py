"""Machine reports in the cluster: each agent's Lease, its report, and the two health signals.

Why it is so: docs/adr/decisions/adapters-kube.md (reports.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict, api_errors, or_none, send_json
from nodeau.adapters.kube.report_form import (
    MachineReport,
    ReportSet,
    parse_report,
    report_json,
)
from nodeau.adapters.record_json import RecordError
from nodeau.domain.health import Signals
from nodeau.ports.cluster import ClusterError

PUBLISH_TRIES = 8
REQUEST_TIMEOUT = (5.0, 15.0)  # connect, read (seconds)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class ReportConflict(ClusterError):
    """The agent Lease kept changing under every try; one line for a person."""


# -- the Lease -------------------------------------------------------------------------------


def micro_time(at: datetime) -> str:
    """A moment in Kubernetes' MicroTime form (RFC 3339, six fraction digits, UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_moment(text: object) -> datetime | None:
    """A Lease time as an aware datetime; None when absent or not a time."""
    if not isinstance(text, str):
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return at if at.utcoffset() is not None else None


def _call(method: Any, *args: Any) -> Any:
    """A client call answered as plain JSON (dicts, lists), with the request timeout."""
    response = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    return json.loads(response.data)


def _lease_body(report: MachineReport, current: Mapping[str, Any] | None) -> dict[str, Any]:
    machine = report.machine
    metadata = dict(current["metadata"]) if current is not None else {}
    metadata.pop("managedFields", None)
    spec = dict(current.get("spec") or {}) if current is not None else {}
    metadata["name"] = r.agent_lease_name(machine)
    metadata["namespace"] = r.NAMESPACE
    metadata["labels"] = {**(metadata.get("labels") or {}), r.MACHINE_LABEL: machine}
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        r.REPORT_ANNOTATION: report_json(report),
    }
    renew = micro_time(report.at)
    spec.update(
        holderIdentity=machine,
        leaseDurationSeconds=r.AGENT_LEASE_SECONDS,
        renewTime=renew,
    )
    spec.setdefault("acquireTime", renew)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


def publish_report(api: Any, report: MachineReport) -> None:
    """Create or renew the machine's agent Lease with this report.

    Replaces under the read ``resourceVersion`` and reads again on a 409;
    ReportConflict after PUBLISH_TRIES tries.
    """
    leases: Any = client.CoordinationV1Api(api)  # Any: plain dict bodies, not the client's models
    name = r.agent_lease_name(report.machine)
    what = f"publish the report on Lease {r.NAMESPACE}/{name}"
    for _ in range(PUBLISH_TRIES):
        current = or_none(what, lambda: _call(leases.read_namespaced_lease, name, r.NAMESPACE))
        try:
            # sent as written: the client's Lease model would drop a zero fraction of renewTime
            with api_errors(what):
                if current is None:
                    send_json(
                        api, "POST", LEASES, {"namespace": r.NAMESPACE}, _lease_body(report, None)
                    )
                else:
                    body = _lease_body(report, current)
                    where = {"namespace": r.NAMESPACE, "name": name}
                    send_json(api, "PUT", f"{LEASES}/{{name}}", where, body)
            return
        except Conflict:  # changed or created by another writer; read again
            continue
    raise ReportConflict(
        f"lease {r.NAMESPACE}/{name} changed under each of {PUBLISH_TRIES} tries; not published"
    )


def _agent_leases(api: Any) -> list[dict[str, Any]]:
    with api_errors("list the agent Leases"):
        listed = _call(client.CoordinationV1Api(api).list_namespaced_lease, r.NAMESPACE)
    return [
        item
        for item in listed.get("items") or []
        if item["metadata"]["name"].startswith(r.AGENT_LEASE_PREFIX)
    ]


def _report_of(lease: Mapping[str, Any]) -> MachineReport:
    name = lease["metadata"]["name"]
    machine = name.removeprefix(r.AGENT_LEASE_PREFIX)
    what = f"the report on lease {r.NAMESPACE}/{name}"
    text = (lease["metadata"].get("annotations") or {}).get(r.REPORT_ANNOTATION)
    if text is None:
        raise RecordError(f"{what} is missing (annotation {r.REPORT_ANNOTATION})")
    report = parse_report(text, what)
    if report.machine != machine:
        raise RecordError(f"{what} is not a readable report: it names machine {report.machine!r}")
    return report


def reports_from(leases: Iterable[Mapping[str, Any]]) -> ReportSet:
    """The readable reports of these agent Leases (plain API objects), and the problems."""
    reports: list[MachineReport] = []
    problems: list[str] = []
    for lease in leases:
        try:
            reports.append(_report_of(lease))
        except RecordError as exc:
            problems.append(" ".join(str(exc).split()))
    return ReportSet(
        reports=tuple(sorted(reports, key=lambda rep: rep.machine)), problems=tuple(problems)
    )


def read_report_set(api: Any) -> ReportSet:
    """Every agent Lease's report, with one line per Lease whose report cannot be read."""
    return reports_from(_agent_leases(api))


def read_reports(api: Any) -> tuple[MachineReport, ...]:
    """Every agent Lease's report, by machine name; unreadable ones are left out."""
    return read_report_set(api).reports


def read_signals(api: Any) -> Mapping[str, Signals]:
    """Per Node: its node Lease's renewTime, its agent Lease's renewTime, the upgrade mark.

    A missing Lease (or one never renewed) is a signal never seen (None).
    """
    with api_errors("read the machines' heartbeats"):
        nodes = _call(client.CoreV1Api(api).list_node)
        node_leases = _call(
            client.CoordinationV1Api(api).list_namespaced_lease, r.NODE_LEASE_NAMESPACE
        )
    heartbeat = {
        item["metadata"]["name"]: lease_moment((item.get("spec") or {}).get("renewTime"))
        for item in node_leases.get("items") or []
    }
    agent = {
        item["metadata"]["name"]: lease_moment((item.get("spec") or {}).get("renewTime"))
        for item in _agent_leases(api)
    }
    signals: dict[str, Signals] = {}
    for node in nodes.get("items") or []:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        signals[name] = Signals(
            node_heartbeat_at=heartbeat.get(name),
            agent_report_at=agent.get(r.agent_lease_name(name)),
            upgrading=labels.get(r.UPGRADING_LABEL) == "true",
        )
    return signals


class KubeMachineReports:
    """``ports.cluster.MachineReports`` on agent Leases, node Leases and Node labels."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def publish(self, report: MachineReport) -> None:
        publish_report(self._api, report)

    def read(self) -> ReportSet:
        return read_report_set(self._api)

    def signals(self) -> Mapping[str, Signals]:
        return read_signals(self._api)
