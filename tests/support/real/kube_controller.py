"""Builders for the controller's Kubernetes tests: machines reporting simulated cards and models.

A machine is a KWOK node plus its agent's report naming simulated GPUs and a fake verified
artifact that fits a 24 GiB card (``SMALL``), no card (``HUGE``), or two split (``split_giant``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import evolve
from kubernetes import client

from nodeau.adapters.entitlement_document import Ed25519EntitlementVerifier
from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.entitlement import KubeEntitlementStore
from nodeau.adapters.kube.lease import LEADER_LEASE
from nodeau.adapters.kube.report_form import MachineArtifact, MachineReport
from nodeau.adapters.kube.reports import publish_report
from nodeau.apps.controller.bootstrap import DEFAULT_WORKERS, kube_controller
from nodeau.apps.controller.loop import Controller
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.hardware import Gpu, GpuReading, MachineReading
from nodeau.domain.memory import GIB
from nodeau.domain.plans import PlanName
from nodeau.domain.reservations import Reservation
from tests.support.builders.entitlements import document, trusted
from tests.support.builders.summaries import SUMMARY
from tests.support.real.kube_nodes import kwok_node, wait_for
from tests.support.real.kube_store import reservations

SMALL_ID = "ab" * 32
HUGE_ID = "cd" * 32


def model_path(machine: str, name: str) -> str:
    return f"/var/lib/nodeau/{machine}/models/{name}.gguf"


def artifact(machine: str, sha: str, name: str, gib: int) -> MachineArtifact:
    return MachineArtifact(
        id=sha, names=(name,), size_bytes=gib * GIB, path=model_path(machine, name), summary=SUMMARY
    )


def small(machine: str) -> MachineArtifact:
    """A 4 GiB model called qwen: fits any 24 GiB card."""
    return artifact(machine, SMALL_ID, "qwen", 4)


def huge(machine: str) -> MachineArtifact:
    """A 40 GiB model called giant: fits no 24 GiB card."""
    return artifact(machine, HUGE_ID, "giant", 40)


# the tiny architecture's two layers at 19 GiB each: no 24 GiB card holds them, two do
SPLIT_WEIGHTS = LayerWeights(
    input_bytes=GIB // 2, layer_bytes=(19 * GIB, 19 * GIB), output_bytes=GIB // 2
)


def split_giant(machine: str) -> MachineArtifact:
    """A 39 GiB model called giant whose file's layers are known: split across two cards."""
    return MachineArtifact(
        id=HUGE_ID, names=("giant",), size_bytes=39 * GIB, path=model_path(machine, "giant"),
        summary=evolve(SUMMARY, layers=SPLIT_WEIGHTS),
    )  # fmt: skip


def report(
    machine: str, cards: int, *artifacts: MachineArtifact, at: datetime | None = None
) -> MachineReport:
    gpus = tuple(
        GpuReading(
            gpu=Gpu(uuid=gpu_uuid(machine, i), model="NVIDIA L4", total_bytes=24 * GIB,
                    simulated=True),
            free_bytes=24 * GIB,
            driver_version="550.54",
        )
        for i in range(cards)
    )  # fmt: skip
    reading = MachineReading(machine=machine, gpus=gpus, simulated=True, note="simulated")
    return MachineReport(reading=reading, at=at or datetime.now(UTC), artifacts=artifacts)


def gpu_uuid(machine: str, i: int) -> str:
    return f"GPU-{machine}-{i:02d}-0000-sim"


def add_machine(api: Any, machine: str, cards: int, *artifacts: MachineArtifact) -> None:
    """A KWOK node and its agent's report."""
    client.CoreV1Api(api).create_node(kwok_node(machine))
    publish_report(api, report(machine, cards, *artifacts))


def create(api: Any, name: str, model: str, plural: str = r.GPUSERVICES, **spec: Any) -> None:
    """Create a GPUService (or BatchJob) as a person applies one. These fleets' models are
    never qualified, so a GPUService says it is served unproved on purpose (``unproved:
    true``, as ``nodeau run --unproved`` writes it) unless ``spec`` says otherwise."""
    kind = r.GPUSERVICE_KIND if plural == r.GPUSERVICES else r.BATCHJOB_KIND
    unproved = {"unproved": True} if plural == r.GPUSERVICES else {}
    body = {
        "apiVersion": r.API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": r.NAMESPACE},
        "spec": {"model": model, **unproved, **spec},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        r.GROUP, r.VERSION, r.NAMESPACE, plural, body
    )


def get(api: Any, name: str, plural: str = r.GPUSERVICES) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
            r.GROUP, r.VERSION, r.NAMESPACE, plural, name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def status(api: Any, name: str, plural: str = r.GPUSERVICES) -> dict[str, Any]:
    found = get(api, name, plural)
    return {} if found is None else dict(found.get("status") or {})


def serving(api: Any, *names: str) -> bool:
    """Whether each named GPUService is recorded serving at an endpoint."""
    return all(
        status(api, n).get("state") == "serving" and bool(status(api, n).get("endpoint"))
        for n in names
    )


def condition(st: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in st.get("conditions") or [] if c["type"] == kind)


def event_reasons(api: Any, name: str) -> set[str]:
    listed = client.CoreV1Api(api).list_namespaced_event(
        r.NAMESPACE, field_selector=f"involvedObject.name={name}"
    )
    return {e.reason for e in listed.items}


def ledger(api: Any) -> tuple[Reservation, ...]:
    return reservations(api)


def controller(
    api: Any,
    identity: str = "test-controller",
    plan: PlanName | None = PlanName.ENTERPRISE,
    workers: int = DEFAULT_WORKERS,
    sole_writer_for: timedelta = timedelta(0),
) -> Controller:
    """The controller in process on ``api``, trusting this run's test key, with an entitlement
    to ``plan`` (None: none) installed in the cluster as ``nodeau plan install`` keeps it:
    these fleets are larger than the Home plan covers, unless a test is about that."""
    if plan is not None:
        entitle(api, plan)
    return kube_controller(
        api,
        clock=lambda: datetime.now(UTC),
        identity=identity,
        log=lambda _l: None,
        verifier=Ed25519EntitlementVerifier(trusted()),
        workers=workers,
        sole_writer_for=sole_writer_for,
    )


def entitle(api: Any, plan: PlanName) -> None:
    """An entitlement to ``plan`` for this cluster's installation, valid around now, kept in
    ConfigMap nodeau-entitlement (signed by this run's test key)."""
    store = KubeEntitlementStore(api)
    now = datetime.now(UTC)
    signed = document(
        store.read().installation_id,
        plan=plan,
        not_before=now - timedelta(days=30),
        not_after=now + timedelta(days=365),
        issued_at=now - timedelta(days=30),
    )
    store.install(signed, now)


def settle(
    ctl: Controller, predicate: Callable[[], bool], what: str, timeout_s: float = 60
) -> None:
    """Run resync passes until ``predicate`` holds (KWOK moves Pods in between)."""

    def step() -> bool:
        ctl.resync()
        return predicate()

    wait_for(step, what, timeout_s)


def lease_of(api: Any) -> Any:
    """The leader Lease as the API server has it (None before the first controller)."""
    try:
        return client.CoordinationV1Api(api).read_namespaced_lease(LEADER_LEASE, r.NAMESPACE)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def holder(api: Any) -> str | None:
    lease = lease_of(api)
    return None if lease is None else lease.spec.holder_identity
