"""``nodeau ps``, ``stop`` and the explain commands on a fleet on Kubernetes.

Decisions recorded here:

* ``ps`` lists every GPUService and BatchJob, not only those holding a card: in
  a cluster an object can exist before the controller decides on it (shown as
  ``pending``) or after a refusal someone else's tool left behind, and a person
  should see both. The columns, and the sentence for a decided workload, are the
  one-machine plane's (``ps_sentence`` on the recorded workload, at now).
* ``stop NAME`` sets ``spec.endpoint`` to ``stopped`` (the model stays loaded);
  ``stop NAME --workload`` deletes the object, and the controller, through the
  object's finalizer, stops its server and releases its reservation.
* The explain commands read ``status.admission`` back into the domain's
  ``Admission``, so their text is the one-machine plane's, byte for byte.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodeau.adapters.record_json import to_plain
from nodeau.apps.cli import cluster_objects as objects
from nodeau.apps.cli.cluster_plane import open_cluster
from nodeau.apps.cli.ps_command import HEADERS
from nodeau.apps.cli.render import table, to_json
from nodeau.domain.workloads import WorkloadKind, ps_sentence
from nodeau.ports.state import Admission, WorkloadRecord

PENDING = "pending"
UNDECIDED = "waiting for the controller's decision"


def ps_rows(api: Any, now: datetime) -> list[dict[str, Any]]:
    """One row per object: what ``ps`` prints, and the record it was read from."""
    rows = []
    for kind, obj in objects.list_all(api):
        held = objects.status(obj)
        record = objects.record_of(obj)
        refusal = held.get("refusal")
        if record is not None:
            sentence = ps_sentence(record.workload, now)
        elif isinstance(refusal, dict):
            sentence = objects.refusal_line(refusal)
        else:
            sentence = str(held.get("sentence") or UNDECIDED)
        rows.append(
            {
                "name": obj["metadata"]["name"],
                "kind": kind.value,
                "model": str(obj.get("spec", {}).get("model", "")),
                "machine": str(held.get("machine") or "-"),
                "gpu": str(held.get("gpuUUID") or "-"),
                "state": str(held.get("state") or PENDING),
                "endpoint": str(held.get("endpoint") or "-"),
                "sentence": sentence,
                "refusal": refusal if isinstance(refusal, dict) else None,
                "record": None if record is None else to_plain(record, WorkloadRecord),
            }
        )
    return rows


def ps(*, json: bool) -> int:
    """Every GPUService and BatchJob in the fleet, with its state and what happens next."""
    api = open_cluster().api
    rows = ps_rows(api, datetime.now(UTC))
    if json:
        print(to_json(rows))
        return 0
    cells = [
        (
            row["name"],
            row["kind"],
            row["model"],
            row["machine"],
            row["gpu"],
            row["state"],
            row["endpoint"],
            row["sentence"],
        )
        for row in rows
    ]
    print(table(HEADERS, cells))
    return 0


def stop(name: str, *, stop_model: bool) -> int:
    """Stop a workload's endpoint (``spec.endpoint: stopped``), or delete the workload."""
    api = open_cluster().api
    kind, obj = objects.find(api, name)
    gpu = objects.status(obj).get("gpuUUID")
    if stop_model:
        objects.delete(api, kind, name)
        frees = f"frees {gpu}" if gpu else "releases whatever it held"
        print(
            f"{name}: {objects.KIND_NAMES[kind]} deleted; the controller stops its model "
            f"server and {frees}"
        )
        return 0
    if kind is WorkloadKind.BATCH:
        print(
            f"{name} is a batch job: it has no endpoint to stop "
            "(nodeau stop NAME --workload stops it and frees its card)"
        )
        return 1
    objects.patch_spec(api, kind, name, {"endpoint": "stopped"})
    print(
        f"{name}: endpoint stopped; the model stays loaded (nodeau run starts it again "
        "at once; --workload frees the card)"
    )
    return 0


def recorded_admission(name: str) -> Admission:
    """The admission the controller recorded for a workload."""
    api = open_cluster().api
    _, obj = objects.find(api, name)
    return objects.admission_of(obj)
