"""Machine reports in the cluster: each agent's Lease, its report, and the two health signals.

Docs/adr/0004 fixes the form: Lease ``nodeau-agent-<machine>`` in
``nodeau-system`` (holder the machine, label ``nodeau.ai/machine``), renewed
at every report, the report as JSON in annotation ``nodeau.ai/report``.

Decisions recorded here:

* Publishing reads the Lease and replaces it under its ``resourceVersion``;
  a 409 (someone wrote in between) reads again, a bounded number of times.
  Labels and annotations others put on the Lease are kept; ``acquireTime``
  is set when the Lease is created and kept after.
* The last publish wins: an agent's clock is its own, and a report is
  replaced even by one dated earlier (the domain's ``merge_reports`` orders
  reports of different machines by their moments).
* A Lease whose report is missing or unreadable (not JSON, an unknown or
  missing key, a naive moment, another machine's name) is left out of
  ``read_reports`` and named, one line each, in ``read_report_set``'s
  ``problems``; it never stops the other reports being read. Its renewTime
  still counts as the agent's signal in ``read_signals``: the agent is alive.
* Unknown keys in a report are refused, as the codec refuses them everywhere,
  and a value of the wrong JSON type too (the codec would turn "false" into
  True): a report is read exactly as an agent wrote it.
* Every call has a request timeout, so an unreachable server is an error
  within seconds, never a hang.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, get_args, get_origin

from attrs import field, frozen
from cattrs import BaseValidationError, transform_error
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import send_json
from nodeau.adapters.record_json import RecordError, converter, to_plain
from nodeau.domain.artifacts import is_sha256_hex
from nodeau.domain.hardware import AgentReport, Gpu, GpuReading, MachineReading
from nodeau.domain.health import Signals
from nodeau.domain.model_info import ModelSummary

PUBLISH_TRIES = 8
REQUEST_TIMEOUT = (5.0, 15.0)  # connect, read (seconds)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class ReportConflict(Exception):
    """The agent Lease kept changing under every try; one line for a person."""


def _sha256_hex(_instance: object, _attribute: object, value: str) -> None:
    if not is_sha256_hex(value):
        raise ValueError(f"an artifact id is 64 lowercase hex digits, got {value!r}")


def _aware(_instance: object, _attribute: object, value: datetime) -> None:
    if value.utcoffset() is None:
        raise ValueError(f"a report's moment must carry a timezone, got {value.isoformat()}")


@frozen(kw_only=True)
class MachineArtifact:
    """One artifact verified on the reporting machine, and where its file is there."""

    id: str = field(validator=_sha256_hex)  # SHA-256 hex
    names: tuple[str, ...]  # aliases and catalog names it is known by on that machine
    size_bytes: int
    path: str  # the verified file (the first one of a split artifact)
    summary: ModelSummary


@frozen(kw_only=True)
class MachineReport:
    """What one machine's agent published at one moment: its cards and its verified models."""

    reading: MachineReading
    at: datetime = field(validator=_aware)
    artifacts: tuple[MachineArtifact, ...] = ()

    @property
    def machine(self) -> str:
        return self.reading.machine

    def as_agent_report(self, *, control_plane: bool = False) -> AgentReport:
        """The domain's agent report (the cards only) this report makes."""
        return self.reading.as_report(self.at, control_plane=control_plane)


@frozen(kw_only=True)
class ReportSet:
    """Every readable report, and one line for each agent Lease that could not be read."""

    reports: tuple[MachineReport, ...]
    problems: tuple[str, ...]


# -- the JSON form (docs/adr/0004) -------------------------------------------------------------


@frozen(kw_only=True)
class _GpuJson:
    uuid: str
    model: str
    total_bytes: int
    free_bytes: int
    driver_version: str


@frozen(kw_only=True)
class _ReportJson:
    machine: str
    at: datetime
    simulated: bool
    note: str = ""
    gpus: tuple[_GpuJson, ...]
    artifacts: tuple[MachineArtifact, ...]  # the same keys as the ADR's


def _exactly(value: object, type_: type) -> object:
    # the codec's own hooks convert ("false" would read as True); a report is read as written
    if type(value) is not type_:
        raise ValueError(f"expected {type_.__name__}, got {value!r}")
    return value


def _is_tuple(type_: Any) -> bool:
    return get_origin(type_) is tuple


def _listed(value: object, type_: Any) -> tuple[Any, ...]:
    if not isinstance(value, list):  # the codec would take a mapping's keys for a list
        raise ValueError(f"expected a list, got {value!r}")
    return tuple(_STRICT.structure(v, get_args(type_)[0]) for v in value)


_STRICT = converter()
for _type in (str, int, bool):
    _STRICT.register_structure_hook(_type, _exactly)
_STRICT.register_structure_hook_func(_is_tuple, _listed)


def report_json(report: MachineReport) -> str:
    """The annotation text of a report."""
    reading = report.reading
    wire = _ReportJson(
        machine=reading.machine,
        at=report.at.astimezone(UTC),
        simulated=reading.simulated,
        note=reading.note,
        gpus=tuple(
            _GpuJson(
                uuid=g.gpu.uuid,
                model=g.gpu.model,
                total_bytes=g.gpu.total_bytes,
                free_bytes=g.free_bytes,
                driver_version=g.driver_version,
            )
            for g in reading.gpus
        ),
        artifacts=report.artifacts,
    )
    return json.dumps(to_plain(wire, _ReportJson), sort_keys=True)


def parse_report(text: str, what: str) -> MachineReport:
    """A report from its annotation text; RecordError naming ``what`` if it is not one."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{what} is not JSON: {exc.msg} at character {exc.pos}") from exc
    try:
        wire = _STRICT.structure(raw, _ReportJson)
    except Exception as exc:  # cattrs raises exception groups for every problem it finds
        problems = transform_error(exc) if isinstance(exc, BaseValidationError) else [str(exc)]
        raise RecordError(f"{what} is not a readable report: {problems[0]}") from exc
    try:
        reading = MachineReading(
            machine=wire.machine,
            gpus=tuple(
                GpuReading(
                    gpu=Gpu(
                        uuid=g.uuid,
                        model=g.model,
                        total_bytes=g.total_bytes,
                        simulated=wire.simulated,
                    ),
                    free_bytes=g.free_bytes,
                    driver_version=g.driver_version,
                )
                for g in wire.gpus
            ),
            simulated=wire.simulated,
            note=wire.note,
        )
        report = MachineReport(
            reading=reading, at=wire.at.astimezone(UTC), artifacts=wire.artifacts
        )
        report.as_agent_report()  # the domain's own checks (a UUID listed twice)
    except ValueError as exc:
        raise RecordError(f"{what} is not a readable report: {exc}") from exc
    return report


# -- the Lease -------------------------------------------------------------------------------


def micro_time(at: datetime) -> str:
    """A moment in Kubernetes' MicroTime form (RFC 3339, six fraction digits, UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _moment(text: object) -> datetime | None:
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
    ReportConflict after PUBLISH_TRIES tries. Other API errors propagate.
    """
    leases: Any = client.CoordinationV1Api(api)  # Any: plain dict bodies, not the client's models
    name = r.agent_lease_name(report.machine)
    for _ in range(PUBLISH_TRIES):
        try:
            current = _call(leases.read_namespaced_lease, name, r.NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
            current = None
        try:
            # sent as written: the client's Lease model would drop a zero fraction of renewTime
            if current is None:
                send_json(
                    api, "POST", LEASES, {"namespace": r.NAMESPACE}, _lease_body(report, None)
                )
            else:
                body = _lease_body(report, current)
                where = {"namespace": r.NAMESPACE, "name": name}
                send_json(api, "PUT", f"{LEASES}/{{name}}", where, body)
            return
        except ApiException as exc:
            if exc.status != 409:  # 409: changed or created by another writer; read again
                raise
    raise ReportConflict(
        f"lease {r.NAMESPACE}/{name} changed under each of {PUBLISH_TRIES} tries; not published"
    )


def _agent_leases(api: Any) -> list[dict[str, Any]]:
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
    nodes = _call(client.CoreV1Api(api).list_node)
    node_leases = _call(client.CoordinationV1Api(api).list_namespaced_lease, r.NODE_LEASE_NAMESPACE)
    heartbeat = {
        item["metadata"]["name"]: _moment((item.get("spec") or {}).get("renewTime"))
        for item in node_leases.get("items") or []
    }
    agent = {
        item["metadata"]["name"]: _moment((item.get("spec") or {}).get("renewTime"))
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
