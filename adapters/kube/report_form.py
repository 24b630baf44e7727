"""A machine report's form: what an agent says about its machine, and its exact JSON.

Why it is so: docs/adr/decisions/adapters-kube.md (report_form.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, get_args, get_origin

from attrs import frozen
from cattrs import BaseValidationError, transform_error

from nodeau.adapters.record_json import RecordError, converter, to_plain
from nodeau.domain.copies import CopyPhase, CopyProgress
from nodeau.domain.fleet_reports import MachineArtifact, MachineReport
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading, PodMemory
from nodeau.domain.model_server import ServerAbilities
from nodeau.ports.cluster import ReportSet

__all__ = ["MachineArtifact", "MachineReport", "ReportSet", "parse_report", "report_json"]


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
    copies: tuple[CopyProgress, ...] = ()  # absent from reports older than copies
    pods: tuple[PodMemory, ...] = ()  # absent from reports older than per-Pod memory
    server: ServerAbilities | None = None  # absent: the agent was not told its server's answer


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


def _phase(value: object, type_: type[CopyPhase]) -> CopyPhase:
    return type_(_exactly(value, str))  # a str subclass: the str hook would refuse the enum


_STRICT = converter()
for _type in (str, int, bool):
    _STRICT.register_structure_hook(_type, _exactly)
_STRICT.register_structure_hook(CopyPhase, _phase)
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
        copies=report.copies,
        pods=report.pods,
        server=report.server,
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
            reading=reading,
            at=wire.at.astimezone(UTC),
            artifacts=wire.artifacts,
            copies=wire.copies,
            pods=wire.pods,
            server=wire.server,
        )
        report.as_agent_report()  # the domain's own checks (a UUID listed twice)
    except ValueError as exc:
        raise RecordError(f"{what} is not a readable report: {exc}") from exc
    return report
