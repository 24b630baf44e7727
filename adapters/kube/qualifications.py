"""The fleet's qualification evidence: ConfigMap nodeau-qualifications in nodeau-system.

One key per artifact (its SHA-256 hex), whose value is the JSON list of that artifact's
runs, oldest first, in Nodeau's record form (``adapters.record_json``): never under an
alias. Decisions recorded here:

* A run is added by reading the ConfigMap and replacing it whole under the version read; a
  409 (another writer first) reads again, a few times: two qualifications never lose each
  other's run.
* At most ``KEPT_RUNS`` runs are kept per artifact (the newest): a ConfigMap holds at most
  1 MiB, and only the newest run decides what a model claims.
* A value that does not read is a ``ClusterError`` naming the key, for every reader.
"""

from __future__ import annotations

from typing import Any

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import Conflict
from nodeau.adapters.kube.config_maps import read_config_map, write_config_map
from nodeau.adapters.record_json import RecordError, dumps, loads
from nodeau.domain.qualification import EvidenceBook, QualificationEvidence, record
from nodeau.ports.cluster import ClusterError

WHERE = f"ConfigMap {r.NAMESPACE}/{r.QUALIFICATIONS_CONFIGMAP}"
KEPT_RUNS = 10
_ATTEMPTS = 8

_Runs = tuple[QualificationEvidence, ...]


def _runs(data: dict[str, str], key: str) -> _Runs:
    try:
        runs = loads(data[key], _Runs, f"{WHERE} key {key}")
    except RecordError as exc:
        raise ClusterError(str(exc)) from exc
    if any(run.artifact_id.hex != key for run in runs):
        raise ClusterError(f"{WHERE} key {key} holds another artifact's evidence")
    return runs


class KubeQualificationRecords:
    """``ports.cluster.QualificationRecords`` on ConfigMap ``nodeau-qualifications``."""

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
        for _ in range(_ATTEMPTS):
            found = read_config_map(self._api, r.QUALIFICATIONS_CONFIGMAP, "read qualifications")
            data, version = ({}, None) if found is None else found
            kept = _runs(data, key) if key in data else ()
            runs = (*kept, evidence)[-KEPT_RUNS:]
            try:
                write_config_map(
                    self._api,
                    r.QUALIFICATIONS_CONFIGMAP,
                    {**data, key: dumps(runs, _Runs)},
                    version,
                    "record a qualification",
                )
            except Conflict:
                continue
            return
        raise ClusterError(f"{WHERE}: other writers kept changing it; try again")
