"""The fleet's qualification evidence: ConfigMap nodeau-qualifications in nodeau-system;
and the peaks it measured on cards: ConfigMap nodeau-measurements.

One key per artifact (its SHA-256 hex), whose value is the JSON list of that artifact's
runs, oldest first, in Nodeau's record form (``adapters.record_json``): never under an
alias. The measurements are kept the same way, a list of ``Measurement`` per artifact, in
a ConfigMap of their own: the controller reads them for every decision it makes, and they
stay small (one per card model and configuration), while the evidence is large and only
the CLI reads it. Decisions recorded here:

* A run is added by reading the ConfigMap and replacing it whole under the version read; a
  409 (another writer first) reads again, a few times: two qualifications never lose each
  other's run.
* At most ``KEPT_RUNS`` runs are kept per artifact (the newest): a ConfigMap holds at most
  1 MiB, and only the newest run decides what a model claims.
* A value that does not read is a ``ClusterError`` naming the key, for every reader.
* A measurement replaces the one of the same key (artifact, card model, configuration):
  the newest counts, as on one machine. Older keys are kept: a model qualified again at
  another context keeps its first context's measurement.
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
