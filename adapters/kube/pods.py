"""The model-server Pod of an admitted workload: its manifest, and creating, reading, deleting it.

Why it is so: docs/adr/decisions/adapters-kube.md (pods.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import field, frozen
from kubernetes import client

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube import server_keys
from nodeau.adapters.kube.client import REQUEST_TIMEOUT, Conflict, api_errors, or_none, send_json
from nodeau.adapters.kube.container_ends import restarts_of, waits_after_an_end
from nodeau.adapters.kube.informer_cache import UNKNOWN, KnownObjects, version_of
from nodeau.adapters.llama_server import HOST, server_command
from nodeau.domain.lifecycle import ServerPhase, ServerRestarts
from nodeau.domain.workloads import WorkloadKind
from nodeau.ports.cluster import ClusterError, ClusterRefused, ServerPod
from nodeau.ports.runtime import ServerSpec
from nodeau.ports.state import WorkloadRecord
from nodeau.ports.workload_objects import WorkloadObject

CONTAINER = "server"
PODS = "pods"  # the plural ``KnownObjects`` keeps them under
WORKER_CONTAINER = "worker"
WORKER_ACCOUNT = "nodeau-batch-worker"
WORKER_MODULE = "nodeau.apps.batch_fleet_worker"
# the controller's and the agent's (deploy/), as scripts/build-images builds it
NODEAU_IMAGE = "localhost/nodeau:0.1.0"


@frozen(kw_only=True)
class PodImages:
    """The images a workload's Pod runs: the model server's, for the CPU (simulated cards)
    and for real NVIDIA cards (CUDA; None: none configured, so no real card is placed on),
    and Nodeau's for a batch job's worker (the controller's ``--server-image``,
    ``--cuda-server-image`` and ``--worker-image``; the defaults are what
    scripts/build-images builds, docs/images.md). ``cuda_runtime_class``: the RuntimeClass a
    Pod on a real card runs with (None: the cluster's default runtime)."""

    server: str = r.SERVER_IMAGE
    cuda_server: str | None = r.CUDA_SERVER_IMAGE
    nodeau: str = NODEAU_IMAGE
    cuda_runtime_class: str | None = None

    def for_card(self, record: WorkloadRecord, *, on_card: bool) -> str:
        """The server image of the record's workload: CUDA where it uses its (real) card,
        else the CPU's."""
        if not on_card:
            return self.server
        if self.cuda_server is None:
            name = record.workload.name
            raise ValueError(f"{name} uses a real card and no CUDA server image is configured")
        return self.cuda_server


TOKEN_VOLUME = "worker-token"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
MODELS_VOLUME = "models"
LISTEN_HOST = "0.0.0.0"  # all addresses of the Pod's own network namespace
_KINDS = {"service": "GPUService", "batch": "BatchJob"}


@frozen(kw_only=True)
class PodView:
    """What the controller reads back from a model-server Pod."""

    name: str
    workload: str
    kind_label: str
    node: str | None
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    ready: bool
    pod_ip: str | None
    deleting: bool
    gpu_uuid: str | None
    restarts: ServerRestarts = field(factory=ServerRestarts)
    previous_log: bool = False  # its log now is the ended run's (it waits for its restart)
    uid: str | None = None  # metadata.uid: what its machine's agent names it by


def _core(api: Any) -> Any:
    return client.CoreV1Api(api)


def server_args(record: WorkloadRecord, *, on_card: bool = True) -> list[str]:
    """llama-server's arguments for the record's admitted configuration, inside a Pod
    (``on_card``: its layers on the card; else none, the CPU's)."""
    spec = ServerSpec(
        name=record.workload.name,
        model_path=Path(record.model_path),
        config=record.config,
        gpu_uuid=record.workload.gpu_uuid if on_card else None,
        log_path=Path("/dev/stderr"),  # unused: the container's output is its log
        split=record.workload.split if on_card else (),
    )
    args = list(server_command(Path("llama-server"), spec, r.SERVER_PORT)[1:])
    host = args.index("--host") + 1
    if args[host] != HOST:
        raise ValueError(f"llama_server listens on {args[host]}, expected {HOST}")
    args[host] = LISTEN_HOST
    return args


def split_env(cards: tuple[str, ...]) -> list[dict[str, str]]:
    """A split's cards in slot order for CUDA (``--tensor-split`` counts them in the order
    CUDA numbers them); nothing for one card."""
    return [{"name": "CUDA_VISIBLE_DEVICES", "value": ",".join(cards)}] if cards else []


def worker_container(job: str, image: str = NODEAU_IMAGE) -> dict[str, Any]:
    """The container that sends a batch job's requests to the server beside it."""
    return {
        "name": WORKER_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", WORKER_MODULE],
        "args": ["--job", job, "--server", f"http://127.0.0.1:{r.SERVER_PORT}"],
        "env": [server_keys.key_env(server_keys.WORKER_VARIABLE, "batch", job)],
        "volumeMounts": [{"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": True}],
    }


def token_volume() -> dict[str, Any]:
    """What automounting would give, for the worker's container alone."""
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                                            "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ]
        },
    }  # fmt: skip


def pod_manifest(
    record: WorkloadRecord,
    owner_uid: str,
    images: PodImages | None = None,
    *,
    on_card: bool = False,
) -> dict[str, Any]:
    """The Pod serving an admitted workload, pinned to its machine and card (``on_card``:
    a real card its server uses: the CUDA image; else the CPU image, a simulated card's)."""
    w = record.workload
    kind_label = w.kind.value
    models_dir = str(PurePosixPath(record.model_path).parent)
    images = images or PodImages()
    image = images.for_card(record, on_card=on_card)
    manifest = _server_pod(record, owner_uid, kind_label, models_dir, image, on_card)
    if on_card and images.cuda_runtime_class:
        manifest["spec"]["runtimeClassName"] = images.cuda_runtime_class
    if w.kind is WorkloadKind.BATCH:
        spec = manifest["spec"]
        spec["restartPolicy"] = "OnFailure"
        spec["serviceAccountName"] = WORKER_ACCOUNT
        spec["automountServiceAccountToken"] = False
        spec["containers"].append(worker_container(w.name, images.nodeau))
        spec["volumes"].append(token_volume())
    return manifest


def _server_pod(
    record: WorkloadRecord,
    owner_uid: str,
    kind_label: str,
    models_dir: str,
    image: str,
    on_card: bool,
) -> dict[str, Any]:
    w = record.workload
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": r.server_pod_name(kind_label, w.name),
            "namespace": r.NAMESPACE,
            "labels": {
                r.WORKLOAD_LABEL: w.name,
                r.KIND_LABEL: kind_label,
                "app.kubernetes.io/part-of": "nodeau",
                "app.kubernetes.io/managed-by": r.CONTROLLER_COMPONENT,
            },
            "ownerReferences": [owner_reference(kind_label, w.name, owner_uid)],
        },
        "spec": {
            "nodeName": w.machine,
            "restartPolicy": "Always",
            "containers": [
                {
                    "name": CONTAINER,
                    "image": image,
                    "args": server_args(record, on_card=on_card),
                    "env": [
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": ",".join(w.cards)},
                        *split_env(w.cards if w.split and on_card else ()),
                        server_keys.key_env(server_keys.SERVER_VARIABLE, kind_label, w.name),
                    ],
                    "ports": [{"name": "http", "containerPort": r.SERVER_PORT}],
                    "readinessProbe": {
                        "httpGet": {"path": "/health", "port": r.SERVER_PORT},
                        "periodSeconds": 5,
                    },
                    # a start that does not answer within 120 s (the one-machine plane's
                    # deadline) is ended by the kubelet and counts as an exit, reported
                    # as restarting like any other
                    "startupProbe": {
                        "httpGet": {"path": "/health", "port": r.SERVER_PORT},
                        "periodSeconds": 5,
                        "failureThreshold": 24,
                    },
                    "volumeMounts": [
                        {"name": MODELS_VOLUME, "mountPath": models_dir, "readOnly": True}
                    ],
                }
            ],
            "volumes": [
                {
                    "name": MODELS_VOLUME,
                    "hostPath": {"path": models_dir, "type": "Directory"},
                }
            ],
        },
    }


def owner_reference(kind_label: str, workload: str, owner_uid: str) -> dict[str, Any]:
    """What names the workload's object as the owner of its Pod and key."""
    return {
        "apiVersion": r.API_VERSION,
        "kind": _KINDS[kind_label],
        "name": workload,
        "uid": owner_uid,
        "controller": True,
    }


def create_pod(api: Any, manifest: dict[str, Any], known: KnownObjects | None = None) -> bool:
    """Create the Pod; False when it already exists (another pass or controller made it)."""
    name = manifest["metadata"]["name"]
    try:
        with api_errors(f"create Pod {name}"):
            made = send_json(
                api, "POST", "/api/v1/namespaces/{namespace}/pods", {"namespace": r.NAMESPACE},
                manifest,
            )  # fmt: skip
    except Conflict:
        if known is not None:
            known.forget(PODS, name)
        return False
    if known is not None:
        known.seen(PODS, made)
    return True


def delete_pod(
    api: Any,
    kind_label: str,
    workload: str,
    *,
    force: bool = False,
    known: KnownObjects | None = None,
) -> bool:
    """Ask for the workload's Pod to go; False when there was none. ``force``: grace
    period 0, the object gone at once (its kubelet ends the container when it sees it
    gone, as ``kubectl delete --force`` does). What is left of it is read again after."""
    name = r.server_pod_name(kind_label, workload)
    grace = {"grace_period_seconds": 0} if force else {}
    if known is not None:
        known.forget(PODS, name)
    gone = or_none(
        f"delete Pod {name}",
        lambda: _core(api).delete_namespaced_pod(
            name, r.NAMESPACE, _request_timeout=REQUEST_TIMEOUT, _preload_content=False, **grace
        ),
    )
    return gone is not None


def view_of(pod: Mapping[str, Any]) -> PodView:
    """A Pod as the API server returns it (plain JSON) as the controller reads it."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    conditions = status.get("conditions") or ()
    env = {
        e["name"]: e.get("value") for c in spec.get("containers") or () for e in c.get("env") or ()
    }
    server = next(
        (c for c in status.get("containerStatuses") or () if c.get("name") == CONTAINER), None
    )
    return PodView(
        name=meta["name"],
        workload=labels.get(r.WORKLOAD_LABEL, ""),
        kind_label=labels.get(r.KIND_LABEL, ""),
        node=spec.get("nodeName"),
        phase=status.get("phase") or "Pending",
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        pod_ip=status.get("podIP") or None,
        deleting=meta.get("deletionTimestamp") is not None,
        gpu_uuid=(env.get("NVIDIA_VISIBLE_DEVICES") or "").split(",")[0] or None,
        restarts=restarts_of(server),
        previous_log=server is not None and waits_after_an_end(server),
        uid=meta.get("uid"),
    )


def read_pod(
    api: Any, kind_label: str, workload: str, known: KnownObjects | None = None
) -> PodView | None:
    """The workload's Pod as it is now (as ``known`` knows it, when it does), or None."""
    name = r.server_pod_name(kind_label, workload)
    if known is not None and (kept := known.lookup(PODS, name)) is not UNKNOWN:
        return None if kept is None else view_of(kept)
    response = or_none(
        f"read Pod {name}",
        lambda: _core(api).read_namespaced_pod(
            name, r.NAMESPACE, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
        ),
    )
    pod = None if response is None else json.loads(response.data)
    if known is not None:
        if pod is None:
            known.gone(PODS, name)
        else:
            known.seen(PODS, pod)
    return None if pod is None else view_of(pod)


def list_pods(api: Any, known: KnownObjects | None = None) -> tuple[PodView, ...]:
    """Every model-server Pod Nodeau created, by name (kept complete in ``known``)."""
    with api_errors("list model-server Pods"):
        response = _core(api).list_namespaced_pod(
            r.NAMESPACE,
            label_selector=r.WORKLOAD_LABEL,
            _request_timeout=REQUEST_TIMEOUT,
            _preload_content=False,
        )
        listed = json.loads(response.data)
    items = listed.get("items") or []
    if known is not None:
        known.listed(PODS, items, version_of(listed))
    return tuple(sorted((view_of(p) for p in items), key=lambda v: v.name))


def phase_of(pod: PodView) -> ServerPhase:
    """What the Pod says of its server, in the domain's words."""
    if pod.deleting:
        return ServerPhase.DELETING
    if pod.phase == "Succeeded":
        return ServerPhase.EXITED_OK
    if pod.phase == "Failed":
        return ServerPhase.EXITED_FAILED
    if pod.phase == "Running" and pod.ready and pod.pod_ip is not None:
        return ServerPhase.READY
    return ServerPhase.STARTING


def endpoint_of(pod: PodView) -> str | None:
    """The OpenAI-compatible address of the Pod's server, once it has an address."""
    return None if pod.pod_ip is None else f"http://{pod.pod_ip}:{r.SERVER_PORT}/v1"


def server_of(pod: PodView, kind: WorkloadKind) -> ServerPod:
    """The port's view of a model-server Pod."""
    return ServerPod(
        workload=pod.workload,
        kind=kind,
        machine=pod.node,
        gpu_uuid=pod.gpu_uuid,
        phase=phase_of(pod),
        endpoint=endpoint_of(pod),
        restarts=pod.restarts,
        pod_uid=pod.uid,
    )


def log_tail(api: Any, pod: PodView, lines: int) -> tuple[str, ...] | None:
    """The last ``lines`` lines of the Pod's server log (the ended run's while it waits
    for its restart); None when the Pod went meanwhile."""
    what = f"read the log of Pod {pod.name}"
    try:
        text = or_none(
            what,
            lambda: _core(api).read_namespaced_pod_log(
                pod.name,
                r.NAMESPACE,
                container=CONTAINER,
                tail_lines=lines,
                previous=pod.previous_log,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )
    except ClusterRefused as exc:
        if exc.status < 500:
            raise
        raise ClusterError(
            f"cannot read the log of {pod.workload}'s model server (Pod {pod.name} on "
            f"{pod.node}): the API server could not get it from {pod.node}'s kubelet "
            f"({exc.message})"
        ) from exc
    if text is None:
        return None
    return tuple(str(text).splitlines()[-lines:])


class KubeServerPods:
    """``ports.cluster.ServerPods``: one Pod per admitted workload in ``nodeau-system``
    (``known``: the controller's cache of them, read where it knows; None: every read
    asks the API server)."""

    def __init__(
        self, api: Any, images: PodImages | None = None, known: KnownObjects | None = None
    ) -> None:
        self._api = api
        self._images = images or PodImages()
        self._known = known

    def read(self, kind: WorkloadKind, workload: str) -> ServerPod | None:
        """The workload's server Pod as it is now, or None."""
        pod = read_pod(self._api, kind.value, workload, self._known)
        return None if pod is None else server_of(pod, kind)

    def read_all(self) -> tuple[ServerPod, ...]:
        """Every workload's server Pod as it is now (one list), by kind then workload."""
        kinds = {k.value: k for k in WorkloadKind}
        found = (
            server_of(pod, kinds[pod.kind_label])
            for pod in list_pods(self._api, self._known)
            if pod.kind_label in kinds
        )
        return tuple(sorted(found, key=lambda s: (s.kind, s.workload)))

    def create(self, record: WorkloadRecord, owner: WorkloadObject, *, on_card: bool) -> bool:
        """Create the Pod the record's admission calls for, and its server's key first
        (kept when it exists); False when the Pod exists."""
        kind_label, name = record.workload.kind.value, record.workload.name
        manifest = pod_manifest(record, owner.uid, self._images, on_card=on_card)
        owner_ref = owner_reference(kind_label, name, owner.uid)
        server_keys.create_key(self._api, server_keys.key_manifest(kind_label, name, owner_ref))
        return create_pod(self._api, manifest, self._known)

    def key(self, kind: WorkloadKind, workload: str) -> str | None:
        """The key its model server asks for; None when it has none."""
        return server_keys.read_key(self._api, kind.value, workload)

    @property
    def serves_real_cards(self) -> bool:
        return self._images.cuda_server is not None

    def delete(self, kind: WorkloadKind, workload: str, *, force: bool = False) -> bool:
        """Ask the Pod to go; False when there was none."""
        return delete_pod(self._api, kind.value, workload, force=force, known=self._known)

    def log_tail(self, kind: WorkloadKind, workload: str, lines: int) -> tuple[str, ...] | None:
        """The last lines of the Pod's server log; None when there is no Pod."""
        pod = read_pod(self._api, kind.value, workload)
        return None if pod is None else log_tail(self._api, pod, lines)
