"""``ports.batches.FleetBatches`` on ConfigMaps: a batch job's results kept in the cluster.

Why it is so: docs/adr/decisions/adapters-kube.md (batch_results.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from attrs import frozen
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors, or_none
from nodeau.adapters.kube.objects import HERE, get_object
from nodeau.domain.batches import kept_or_too_large
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.cluster import ClusterError
from nodeau.ports.state import UnknownWorkload

RESULTS_LABEL = f"{r.GROUP}/batch-results"
RESULTS_KEY = "results.jsonl"
PIECE_BYTES = 768 * 1024
MAX_TRIES = 20  # appends lost to another writer in a row before giving up
MERGE_PATCH = "application/merge-patch+json"


def piece_name(job: str, index: int) -> str:
    """The name of piece ``index`` of a job's results."""
    return f"batch-results-{job}-{index}"


@frozen(kw_only=True)
class Piece:
    """One ConfigMap of results as read: its place, its text, its resourceVersion."""

    index: int
    text: str
    version: str


def read_piece(api: Any, job: str, index: int) -> Piece | None:
    core: Any = client.CoreV1Api(api)
    name = piece_name(job, index)
    found = or_none(
        f"read ConfigMap {name}",
        lambda: core.read_namespaced_config_map(
            name, r.NAMESPACE, _request_timeout=REQUEST_TIMEOUT
        ),
    )
    if found is None:
        return None
    text = (found.data or {}).get(RESULTS_KEY, "")
    return Piece(index=index, text=str(text), version=str(found.metadata.resource_version))


def read_pieces(api: Any, job: str, start: int = 0) -> list[Piece]:
    """The job's pieces from ``start`` on, in order, up to the first that is not there."""
    pieces: list[Piece] = []
    while (piece := read_piece(api, job, start + len(pieces))) is not None:
        pieces.append(piece)
    return pieces


def parsed_lines(pieces: list[Piece]) -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    for piece in pieces:
        for line in piece.text.splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                out.append(item)
    return tuple(out)


def piece_body(job: str, owner_uid: str, index: int, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": piece_name(job, index),
            "namespace": r.NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "nodeau", RESULTS_LABEL: job},
            "ownerReferences": [
                {
                    "apiVersion": r.API_VERSION,
                    "kind": r.BATCHJOB_KIND,
                    "name": job,
                    "uid": owner_uid,
                }
            ],
        },
        "data": {RESULTS_KEY: text},
    }


class KubeFleetBatches:
    """A batch job's results in ConfigMaps and its stop in its spec, through the API server."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self._core: Any = client.CoreV1Api(api)
        self._custom: Any = client.CustomObjectsApi(api)
        self._owners: dict[str, str] = {}
        self._last: dict[str, Piece | None] = {}  # job: its last piece as last written

    def lines(self, job: str) -> tuple[dict[str, Any], ...]:
        pieces = read_pieces(self._api, job)
        self._last[job] = pieces[-1] if pieces else None
        return parsed_lines(pieces)

    def append(self, job: str, line: Mapping[str, Any]) -> None:
        text = json.dumps(dict(line)) + "\n"
        kept = kept_or_too_large(line, len(text.encode("utf-8")), PIECE_BYTES - 1)
        text = json.dumps(kept) + "\n"
        for _ in range(MAX_TRIES):
            last = self._tail(job)
            try:
                if last is not None and len((last.text + text).encode("utf-8")) <= PIECE_BYTES:
                    self._last[job] = self._replace(job, last, last.text + text)
                else:
                    index = 0 if last is None else last.index + 1
                    self._last[job] = self._create(job, index, text)
                return
            except Conflict:
                self._last.pop(job, None)  # another write came first: read again
        raise ClusterError(
            f"cannot keep a result of batch job {job}: its results changed under "
            f"{MAX_TRIES} writes in a row"
        )

    def ask_stop(self, job: str) -> bool:
        patch = {"spec": {"stop": True}}
        done = or_none(
            f"ask BatchJob {job} to stop",
            lambda: self._custom.patch_namespaced_custom_object(
                *HERE, r.BATCHJOBS, job, patch,
                _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT,
            ),
        )  # fmt: skip
        return done is not None

    def where(self, job: str) -> str:
        return f"ConfigMaps -n {r.NAMESPACE} -l {RESULTS_LABEL}={job}"

    # -- plumbing

    def _tail(self, job: str) -> Piece | None:
        """The job's last piece: as last written here, else read (from the last known)."""
        if job in self._last:
            return self._last[job]
        pieces = read_pieces(self._api, job)
        self._last[job] = pieces[-1] if pieces else None
        return self._last[job]

    def _owner(self, job: str) -> str:
        if job not in self._owners:
            found = get_object(self._api, WorkloadKind.BATCH, job)
            if found is None:
                raise UnknownWorkload(f"no BatchJob called {job} in {r.NAMESPACE}")
            self._owners[job] = found.uid
        return self._owners[job]

    def _create(self, job: str, index: int, text: str) -> Piece:
        body = piece_body(job, self._owner(job), index, text)
        with api_errors(f"create ConfigMap {piece_name(job, index)}"):
            made = self._core.create_namespaced_config_map(
                r.NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT
            )
        return Piece(index=index, text=text, version=str(made.metadata.resource_version))

    def _replace(self, job: str, last: Piece, text: str) -> Piece:
        body = piece_body(job, self._owner(job), last.index, text)
        body["metadata"]["resourceVersion"] = last.version
        name = piece_name(job, last.index)
        written = or_none(
            f"write ConfigMap {name}",
            lambda: self._core.replace_namespaced_config_map(
                name, r.NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        if written is None:  # deleted since it was read: a change like any other
            raise Conflict(f"write ConfigMap {name}", 404, "it is gone")
        return Piece(index=last.index, text=text, version=str(written.metadata.resource_version))
