"""The fleet's qualification evidence: ConfigMap nodeau-qualifications in nodeau-system;
and the peaks it measured on cards: ConfigMap nodeau-measurements.

Why it is so: docs/adr/decisions/adapters-kube.md (qualifications.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict
from nodeau.adapters.kube.config_maps import read_config_map, write_config_map
from nodeau.adapters.record_json import RecordError, dumps, loads
from nodeau.domain.memory import MeasuredTable, Measurement
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence, record
from nodeau.ports.cluster import ClusterError

WHERE = f"ConfigMap {r.NAMESPACE}/{r.QUALIFICATIONS_CONFIGMAP}"
MEASUREMENTS_CONFIGMAP = "nodeau-measurements"  # one key per artifact (SHA-256 hex)
MEASURED_WHERE = f"ConfigMap {r.NAMESPACE}/{MEASUREMENTS_CONFIGMAP}"
KEPT_RUNS = 10
_ATTEMPTS = 8

_Runs = tuple[QualificationEvidence, ...]
_Peaks = tuple[Measurement, ...]


def _runs(data: dict[str, str], key: str) -> _Runs:
    try:
        runs = loads(data[key], _Runs, f"{WHERE} key {key}")
    except RecordError as exc:
        raise ClusterError(str(exc)) from exc
    if any(run.artifact_id.hex != key for run in runs):
        raise ClusterError(f"{WHERE} key {key} holds another artifact's evidence")
    return runs


def _peaks(data: Mapping[str, str], key: str) -> _Peaks:
    try:
        peaks = loads(data[key], _Peaks, f"{MEASURED_WHERE} key {key}")
    except RecordError as exc:
        raise ClusterError(str(exc)) from exc
    if any(m.key.artifact_id != key for m in peaks):
        raise ClusterError(f"{MEASURED_WHERE} key {key} holds another artifact's measurement")
    return peaks


class KubeQualificationRecords:
    """``ports.cluster.QualificationRecords`` on ConfigMap ``nodeau-qualifications`` (and
    ``ports.cluster.MeasuredPeaks`` on ``nodeau-measurements``)."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def evidence(self) -> EvidenceBook:
        found = read_config_map(self._api, r.QUALIFICATIONS_CONFIGMAP, "read qualifications")
        book = EvidenceBook.empty()
        for key in sorted(found[0] if found is not None else {}):
            for run in _runs(found[0], key) if found is not None else ():
                book = record(book, run)
        return book

    def record_evidence(self, evidence: QualificationEvidence) -> None:
        key = evidence.artifact_id.hex

        def add(data: dict[str, str]) -> dict[str, str]:
            kept = _runs(data, key) if key in data else ()
            return {**data, key: dumps((*kept, evidence)[-KEPT_RUNS:], _Runs)}

        self._change(r.QUALIFICATIONS_CONFIGMAP, WHERE, add, "record a qualification")

    def measurements(self) -> MeasuredTable:
        found = read_config_map(self._api, MEASUREMENTS_CONFIGMAP, "read measured peaks")
        data = found[0] if found is not None else {}
        return MeasuredTable(measurements=tuple(m for k in sorted(data) for m in _peaks(data, k)))

    def record_measurement(self, measurement: Measurement) -> None:
        key = measurement.key.artifact_id

        def add(data: dict[str, str]) -> dict[str, str]:
            kept = _peaks(data, key) if key in data else ()
            others = tuple(m for m in kept if m.key != measurement.key)
            return {**data, key: dumps((*others, measurement), _Peaks)}

        self._change(MEASUREMENTS_CONFIGMAP, MEASURED_WHERE, add, "record a measured peak")

    def _change(
        self,
        name: str,
        where: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        what: str,
    ) -> None:
        """Replace ConfigMap ``name`` whole under the version read; read again on a 409."""
        for _ in range(_ATTEMPTS):
            found = read_config_map(self._api, name, f"read {where}")
            data, version = ({}, None) if found is None else found
            try:
                write_config_map(self._api, name, change(data), version, what)
            except Conflict:
                continue
            return
        raise ClusterError(f"{where}: other writers kept changing it; try again")
