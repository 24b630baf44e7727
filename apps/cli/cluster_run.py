"""``nodeau run`` on a fleet on Kubernetes: ask with a GPUService, wait for the decision.

Decisions recorded here:

* The CLI decides nothing itself: it creates the GPUService and waits, for a
  bounded time (``--wait``, 60 s by default), for the controller's decision in
  the object's status. Admission and placement are the controller's, against
  the ledger in the cluster.
* Admitted: it prints the machine, the GPU, the reservation, the state and the
  endpoint, like the one-machine plane. Refused: it prints kind, code and
  sentence exactly as the one-machine plane does, deletes the object (a refusal
  creates nothing) and exits 2. No decision in time: it says so, leaves the
  object for the controller, and exits 1.
* The object is named ``--name``, else after the model, made a valid
  Kubernetes name (lower case; anything but letters, digits, ``.`` and ``-``
  becomes ``-``). Running a name that exists with the same model brings its
  endpoint back (``spec.endpoint: serving``) and reports the decision it has.
"""

from __future__ import annotations

import re
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.apps.cli import cluster_objects as objects
from nodeau.apps.cli.cluster_plane import open_cluster
from nodeau.apps.cli.errors import SettingsError
from nodeau.apps.cli.render import size, to_json
from nodeau.apps.cli.serving import report_refusal
from nodeau.domain.workloads import WorkloadKind, ps_sentence
from nodeau.ports.state import StateError

NAME_SHAPE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
POLL_S = 0.2
UNDECIDED = 1


def object_name(model: str, name: str | None) -> str:
    """The GPUService's name: ``--name`` as given, else the model's, made a valid name."""
    if name is not None:
        if NAME_SHAPE.match(name) is None:
            raise SettingsError(
                f"--name {name!r}: use lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit (at most 253 characters)"
            )
        return name
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", model.lower()).strip("-.")[:253].strip("-.")
    if not cleaned:
        raise SettingsError(f"cannot make a workload name from {model!r}; give --name")
    return cleaned


def gpuservice(
    name: str, *, model: str, task: str, context: int | None, recovery: str, after: timedelta
) -> dict[str, Any]:
    """The GPUService a ``nodeau run`` asks for."""
    spec: dict[str, Any] = {
        "model": model,
        "task": task,
        "recovery": recovery,
        "recoveryAfterSeconds": int(after.total_seconds()),
        "endpoint": "serving",
    }
    if context is not None:
        spec["contextTokens"] = context
    return {
        "apiVersion": r.API_VERSION,
        "kind": r.GPUSERVICE_KIND,
        "metadata": {"name": name, "namespace": r.NAMESPACE},
        "spec": spec,
    }


def ask(api: Any, body: dict[str, Any]) -> None:
    """Create the GPUService; an existing one with the same model gets its endpoint back."""
    name, model = body["metadata"]["name"], body["spec"]["model"]
    try:
        objects.custom(api).create_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, r.GPUSERVICES, body
        )
        return
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    existing = objects.read(api, WorkloadKind.SERVICE, name)
    if existing is None or existing["metadata"].get("deletionTimestamp"):
        raise StateError(f"{name} is being deleted; try again in a moment")
    if existing.get("spec", {}).get("model") != model:
        raise StateError(
            f"{name} already exists, serving {existing['spec'].get('model')!r}; "
            f"give another --name or remove it with nodeau stop {name} --workload"
        )
    if existing["spec"].get("endpoint") == "stopped":
        objects.patch_spec(api, WorkloadKind.SERVICE, name, {"endpoint": "serving"})


def decided(obj: dict[str, Any]) -> bool:
    """Whether the controller has recorded its decision (an admission or a refusal)."""
    held = objects.status(obj)
    if isinstance(held.get("refusal"), dict):
        return True
    admitted = any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in held.get("conditions") or []
    )
    return bool(held.get("machine") and held.get("gpuUUID")) or admitted


def wait_for_decision(api: Any, name: str, wait_s: float) -> dict[str, Any] | None:
    """The object once decided; None when the deadline passed first."""
    deadline = time.monotonic() + wait_s
    while True:
        obj = objects.read(api, WorkloadKind.SERVICE, name)
        if obj is None:
            raise StateError(f"{name} was deleted before the controller decided")
        if decided(obj):
            return obj
        if time.monotonic() >= deadline:
            return None
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


def admitted_lines(obj: dict[str, Any], now: datetime) -> list[str]:
    """What ``nodeau run`` prints for an admitted workload."""
    name, held = obj["metadata"]["name"], objects.status(obj)
    gpu = str(held.get("gpuUUID", "-"))
    hardware = " (SIMULATED card)" if "SIM-GPU" in gpu else ""
    reserved = held.get("reservedBytes")
    reserving = (
        f", reserving {size(int(reserved))} ({held.get('source', 'estimated')})"
        if isinstance(reserved, int)
        else ""
    )
    record = objects.record_of(obj)
    sentence = ps_sentence(record.workload, now) if record else held.get("sentence", "")
    endpoint = held.get("endpoint")
    return [
        f"{name}: admitted on {held.get('machine', '-')}, {gpu}{hardware}{reserving}",
        f"state {held.get('state', 'admitted')}: {sentence}".rstrip(": "),
        f"serving at {endpoint}"
        if endpoint
        else "no endpoint yet: the model server is starting (nodeau ps shows when it serves)",
    ]


def run_on_cluster(
    *,
    model: str,
    name: str | None,
    task: str,
    context: int | None,
    recovery: str,
    after: timedelta,
    wait_s: float,
    json: bool,
) -> int:
    """Ask the fleet for a workload and report the controller's decision."""
    if wait_s < 0:
        raise SettingsError("--wait must be zero or more seconds")
    workload = object_name(model, name)
    api = open_cluster().api
    body = gpuservice(
        workload, model=model, task=task, context=context, recovery=recovery, after=after
    )
    ask(api, body)
    obj = wait_for_decision(api, workload, wait_s)
    if obj is None:
        print(
            f"nodeau: the controller did not decide on {workload} within {wait_s:g} seconds; "
            f"the GPUService is left for it (nodeau ps shows it; nodeau stop {workload} "
            "--workload removes it). Is the controller running? "
            f"kubectl -n {r.NAMESPACE} get deployments",
            file=sys.stderr,
        )
        return UNDECIDED
    refusal = objects.status(obj).get("refusal")
    if isinstance(refusal, dict):
        objects.delete(api, WorkloadKind.SERVICE, workload)
        return report_refusal(
            str(refusal.get("kind")), str(refusal.get("code")), str(refusal.get("message"))
        )
    if json:
        print(to_json({"name": workload, "status": objects.status(obj)}))
        return 0
    print("\n".join(admitted_lines(obj, datetime.now(UTC))))
    return 0
